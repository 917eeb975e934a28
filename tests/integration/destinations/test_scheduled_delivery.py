"""A schedule's fire reaches DingTalk, Feishu, WeCom, email and a webhook once each (every fake server checks
its signature or key; the mail carries the file); a MariaDB restart between a robot's answer and our record
of it still makes one message, not two.

Real MariaDB (restarted for real in the second test), Redis, in-process burst workers and scheduler ticks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from app.core.db import session_scope
from app.core.times import utcnow
from app.maintenance import service as maintenance
from app.schedules import firing
from tests.utils.destinations import (
    deliveries,
    dingtalk_body,
    feishu_body,
    make_destination,
    run_and_deliver,
    webhook_body,
)
from tests.utils.fakes.feishu import FakeFeishu
from tests.utils.outages import MariaDBBlip
from tests.utils.schedules import create_schedule, make_due, schedule_jobs
from tests.utils.workers import drain_alerts

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def feishu(env: Any) -> Iterator[FakeFeishu]:
    fake = FakeFeishu().start()
    yield fake
    fake.stop()


def email_body(smtp: Any) -> dict[str, Any]:
    return {
        "kind": "email",
        "name": "finance-mail",
        "host": "127.0.0.1",
        "port": smtp.port,
        "security": "none",
        "sender": "Reports <reports@example.com>",
        "recipients": ["cfo@example.com"],
    }


async def fire_now(schedule_id: str) -> str:
    """Make the schedule due at a whole hour (a day ahead) and let the scheduler's fire loop act on it a
    second later; the fire's job id."""
    base = (utcnow() + timedelta(days=1)).replace(minute=0, second=0, microsecond=0)
    await make_due(schedule_id, base)
    await firing.fire_due(base + timedelta(seconds=1))
    [job] = await schedule_jobs(schedule_id)
    return job.id


async def test_a_scheduled_report_reaches_dingtalk_feishu_wecom_email_and_a_webhook_once_each(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    dingtalk: Any,
    feishu: FakeFeishu,
    wecom: Any,
    smtp_server: Any,
    receiver: Any,
) -> None:
    bodies = [
        dingtalk_body(dingtalk),
        feishu_body(feishu),
        {"kind": "wecom", "name": "ops-wecom", "url": wecom.url},
        email_body(smtp_server),
        webhook_body(receiver),
    ]
    for body in bodies:
        await make_destination(client, auth, body)
    deliver_to = [{"destination": b["name"]} for b in bodies]
    deliver_to[3]["recipients"] = ["ceo@example.com"]
    schedule = await create_schedule(
        client, auth, cron="0 * * * *", timezone="Asia/Shanghai", deliver_to=deliver_to
    )
    assert [d["destination_id"] for d in schedule["deliver_to"]] != [
        b["name"] for b in bodies
    ]  # stored by id
    job_id = await fire_now(schedule["id"])
    await run_and_deliver()

    assert len(dingtalk.accepted) == len(feishu.accepted) == len(wecom.accepted) == 1
    assert len(receiver.accepted) == 1 and len(smtp_server.received) == 1
    assert "daily-sales" in dingtalk.accepted[0].text and "Asia/Shanghai" in dingtalk.accepted[0].text
    assert "demo.csv is ready" in wecom.accepted[0].content
    mail = smtp_server.received[0]
    assert sorted(mail.rcpt_tos) == ["ceo@example.com", "cfo@example.com"]
    assert mail.message["Subject"] == "demo.csv is ready"
    [attached] = list(mail.message.iter_attachments())
    output = await client.get(f"/v1/jobs/{job_id}/output", headers=auth)
    assert (
        attached.get_filename() == f"demo-{job_id}.csv" and attached.get_content().encode() == output.content
    )
    assert "/d/" in mail.message.get_body(("plain",)).get_content()  # the link as well
    rows = await deliveries(client, auth, job_id)
    assert sorted(r["kind"] for r in rows) == ["dingtalk", "email", "feishu", "webhook", "wecom"]
    assert {(r["status"], r["tries"]) for r in rows} == {("sent", 1)}


async def test_a_mariadb_restart_between_the_robots_answer_and_the_record_sends_one_message(
    client: httpx.AsyncClient, auth: dict[str, str], dingtalk: Any, blip: MariaDBBlip
) -> None:
    await make_destination(client, auth, dingtalk_body(dingtalk))
    job = {"deliver_to": [{"destination": "ops-dingtalk"}]}
    resp = await client.post(
        "/v1/jobs", json={"report_type": "demo.csv", "params": {"rows": 1}, **job}, headers=auth
    )
    job_id = resp.json()["id"]
    dingtalk.before_next_answer(blip)
    await run_and_deliver()
    assert blip.happened
    await asyncio.to_thread(blip.wait_back)
    for _ in range(2):  # what production does next: the scheduler re-publishes what is due, a consumer runs
        await maintenance.run_tick(use_lease=False)
        await drain_alerts()
    assert [r.reason for r in dingtalk.received] == [""], "the robot must receive the report exactly once"
    [row] = await deliveries(client, auth, job_id)
    assert (row["status"], row["tries"]) == ("sent", 1)


async def test_a_schedules_keep_outputs_s_keeps_its_jobs_past_the_retention_and_others_go(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(JOB_RETENTION_S="60")
    schedule = await create_schedule(client, auth, cron="0 * * * *", keep_outputs_s=7 * 86400)
    assert schedule["keep_outputs_s"] == 7 * 86400
    kept = await fire_now(schedule["id"])  # fired a day ahead: kept 7 days past that
    body = {"report_type": "demo.csv", "params": {"rows": 1}}
    plain = await client.post("/v1/jobs", json=body, headers=auth)
    await run_and_deliver()
    async with session_scope() as session:  # both finished two hours ago, past the 60 s retention
        past = utcnow() - timedelta(hours=2)
        await session.execute(text("UPDATE report_jobs SET finished_at = :t"), {"t": past})
    assert await maintenance.purge_expired_jobs() == 1
    assert (await client.get(f"/v1/jobs/{kept}", headers=auth)).status_code == 200
    assert (await client.get(f"/v1/jobs/{plain.json()['id']}", headers=auth)).status_code == 404
