"""A done job reaches each of its destinations once (real fake robots and a webhook receiver that verify the
signatures), with a download link that needs no API key; failures are retried, empty reports skipped on
request, a resend sends again, and a dead job delivers nothing.

Real MariaDB, Redis, in-process burst workers (the job's and the notifications channel's).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.utils.destinations import (
    deliveries,
    dingtalk_body,
    feishu_body,
    make_destination,
    run_and_deliver,
    webhook_body,
)
from tests.utils.fakes.feishu import FakeFeishu
from tests.utils.jobs import get_job, submit_id

LINK_START = "http://"


@pytest.fixture
def feishu(env: Any) -> Iterator[FakeFeishu]:
    fake = FakeFeishu().start()
    yield fake
    fake.stop()


@pytest.fixture
async def fast_retries(env: Any) -> None:
    await env.set(DELIVERY_RETRY_MIN_S="0.2", DELIVERY_RETRY_MAX_S="0.5")


def link_in(text: str) -> str:
    start = text.index(LINK_START, text.index("Download"))
    end = min(i for i in (text.find(")", start), text.find("\n", start), len(text)) if i != -1)
    return text[start:end]


async def test_a_done_job_is_delivered_once_to_each_destination_with_a_key_free_link(
    client: httpx.AsyncClient, auth: dict[str, str], dingtalk: Any, feishu: FakeFeishu, receiver: Any
) -> None:
    for body in (dingtalk_body(dingtalk), feishu_body(feishu), webhook_body(receiver)):
        await make_destination(client, auth, body)
    deliver_to = [{"destination": n} for n in ("ops-dingtalk", "ops-feishu", "warehouse-hook")]
    job_id = await submit_id(client, auth, "demo.csv", job={"deliver_to": deliver_to}, rows=3)
    await run_and_deliver()

    assert len(dingtalk.accepted) == len(feishu.accepted) == len(receiver.accepted) == 1
    text = dingtalk.accepted[0].text
    assert "demo.csv is ready" in text and "acme" in text and "@13800000000" in text
    hook = receiver.accepted[0].body
    assert hook["event"] == "report.delivered" and hook["job_id"] == job_id and hook["output"]["rows"] == 3
    assert receiver.accepted[0].headers["idempotency-key"]
    rows = await deliveries(client, auth, job_id)
    assert sorted(d["status"] for d in rows) == ["sent"] * 3 and all(d["tries"] == 1 for d in rows)
    # The link works without any API key, and is the same file as the authenticated download.
    link = hook["link"]
    # Each message signs its link as it is sent: the two expire within a second of each other.
    assert httpx.URL(link).path == httpx.URL(link_in(text)).path
    resp = await client.get(httpx.URL(link).raw_path.decode())  # no Authorization header
    assert resp.status_code == 200, resp.text
    authed = await client.get(f"/v1/jobs/{job_id}/output", headers=auth)
    assert resp.content == authed.content and resp.content.startswith(b"id,name,value")


async def test_a_robot_answering_500_then_200_gets_one_message_after_two_tries(
    client: httpx.AsyncClient, auth: dict[str, str], dingtalk: Any, fast_retries: None
) -> None:
    await make_destination(client, auth, dingtalk_body(dingtalk))
    dingtalk.script = ["http500"]
    job_id = await submit_id(
        client, auth, "demo.csv", job={"deliver_to": [{"destination": "ops-dingtalk"}]}, rows=1
    )
    await run_and_deliver()
    assert len(dingtalk.received) == 2 and len(dingtalk.accepted) == 1
    [row] = await deliveries(client, auth, job_id)
    assert (row["status"], row["tries"], row["last_error"]) == ("sent", 2, None)


async def test_an_empty_report_is_skipped_where_asked_and_sent_elsewhere(
    client: httpx.AsyncClient, auth: dict[str, str], dingtalk: Any, receiver: Any
) -> None:
    await make_destination(client, auth, dingtalk_body(dingtalk))
    await make_destination(client, auth, webhook_body(receiver))
    deliver_to = [{"destination": "ops-dingtalk", "skip_when_empty": True}, {"destination": "warehouse-hook"}]
    job_id = await submit_id(client, auth, "demo.csv", job={"deliver_to": deliver_to}, rows=1, empty=True)
    await run_and_deliver()
    assert (await get_job(client, auth, job_id))["status"] == "done"
    assert dingtalk.received == [] and len(receiver.accepted) == 1
    assert receiver.accepted[0].body["output"]["rows"] == 0
    by_kind = {d["kind"]: d for d in await deliveries(client, auth, job_id)}
    assert by_kind["dingtalk"]["status"] == "skipped" and by_kind["webhook"]["status"] == "sent"


async def test_a_resend_sends_a_sent_delivery_once_more(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any
) -> None:
    await make_destination(client, auth, webhook_body(receiver))
    job_id = await submit_id(
        client, auth, "demo.csv", job={"deliver_to": [{"destination": "warehouse-hook"}]}, rows=1
    )
    await run_and_deliver()
    [row] = await deliveries(client, auth, job_id)
    resp = await client.post(f"/v1/jobs/{job_id}/deliveries/{row['id']}/resend", headers=auth)
    assert resp.status_code == 202, resp.text
    await run_and_deliver()
    assert len(receiver.accepted) == 2
    assert [d["status"] for d in await deliveries(client, auth, job_id)] == ["sent"]


async def test_a_dead_job_delivers_nothing(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any
) -> None:
    await make_destination(client, auth, webhook_body(receiver))
    job = {"deliver_to": [{"destination": "warehouse-hook"}]}
    job_id = await submit_id(client, auth, "demo.flaky", job=job, fail_times=1, permanent=True)
    await run_and_deliver()
    assert (await get_job(client, auth, job_id))["status"] == "dead"
    assert receiver.received == [] and await deliveries(client, auth, job_id) == []
