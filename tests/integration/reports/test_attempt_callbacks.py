"""The attempt callbacks of asynchronous HTTP reports: authenticated by the token alone, each a
compare-and-set against that attempt still running. A token of another attempt, another job or tenant, an
ended attempt or a changed token is refused (problem+json) and changes nothing; a cancel reaches the service.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from app.core.attempt_tokens import AttemptClaim, mint
from app.core.config import get_settings
from tests.utils.fakes.report_service import FakeReportService
from tests.utils.http_reports import callback_path, http_type, register_http_type
from tests.utils.jobs import cancel, get_attempts, get_job, submit_id, wait_job
from tests.utils.keys import make_key
from tests.utils.workers import drain

PROBLEM = "application/problem+json"


@pytest.fixture
def async_type(monkeypatch: pytest.MonkeyPatch, service: FakeReportService) -> str:
    rtype = http_type("t.http.async", f"{service.url}/reports/{{region}}", "async")
    return register_http_type(monkeypatch, rtype).name


async def started(
    client: httpx.AsyncClient, auth: dict[str, str], service: FakeReportService, name: str, calls: int = 1
) -> tuple[str, asyncio.Task[None]]:
    service.script = ["accept"] * 3
    job_id = await submit_id(client, auth, name)
    worker = asyncio.create_task(drain(timeout_s=30))
    await service.calls_made(calls)
    return job_id, worker


def refused(resp: httpx.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith(PROBLEM)
    return dict(resp.json())


async def test_a_token_is_dead_once_its_attempt_ends(
    client: httpx.AsyncClient, auth: dict[str, str], service: FakeReportService, async_type: str
) -> None:
    job_id, worker = await started(client, auth, service, async_type)
    call = service.calls[0]
    done = await client.post(callback_path(call, "complete"), params={"filename": "a.csv"}, content=b"a\n")
    assert done.status_code == 202
    await worker
    assert (await wait_job(client, auth, job_id))["status"] == "done"
    again = refused(
        await client.post(callback_path(call, "complete"), params={"filename": "b.csv"}, content=b"b"), 410
    )
    assert again["cancel"] is True and "no longer running (succeeded)" in again["detail"]
    beat = refused(await client.post(callback_path(call, "heartbeat")), 410)
    assert beat["cancel"] is True
    job = await get_job(client, auth, job_id)
    assert job["output"]["filename"] == "a.csv"  # nothing changed


async def test_a_token_of_one_attempt_cannot_complete_the_next_one(
    client: httpx.AsyncClient, auth: dict[str, str], service: FakeReportService, async_type: str
) -> None:
    job_id, worker = await started(client, auth, service, async_type)
    first = service.calls[0]
    retry = await client.post(callback_path(first, "fail"), json={"message": "db busy", "retryable": True})
    assert retry.status_code == 202
    second = (await service.calls_made(2))[1]
    assert second.envelope["attempt"] == 2 and second.callback["url"] != first.callback["url"]
    late = refused(
        await client.post(callback_path(first, "complete"), params={"filename": "old.csv"}, content=b"old"),
        410,
    )
    assert late["cancel"] is True and "Attempt 1" in late["detail"]
    assert (
        await client.post(callback_path(second, "complete"), params={"filename": "new.csv"}, content=b"new")
    ).status_code == 202
    await worker
    job = await wait_job(client, auth, job_id)
    assert job["status"] == "done" and job["output"]["filename"] == "new.csv"
    assert [a["outcome"] for a in await get_attempts(client, auth, job_id)] == ["failed", "succeeded"]


async def test_a_token_cannot_be_turned_into_another_jobs_or_tenants(
    client: httpx.AsyncClient, auth: dict[str, str], service: FakeReportService, async_type: str
) -> None:
    other_auth = await make_key(tenant="globex")
    _, worker = await started(client, auth, service, async_type)
    theirs = await submit_id(client, other_auth, "demo.sleep", seconds=0.1)
    token = callback_path(service.calls[0], "complete").split("/")[3]
    signature = token.split(".")[1]
    forged_claim = AttemptClaim(theirs, 0, 1, "acme", int(time.time()) + 600, "x")
    forged = mint(forged_claim, get_settings()).split(".")[0] + "." + signature
    refused(
        await client.post(f"/v1/attempt-callbacks/{forged}/complete", params={"filename": "x"}, content=b"x"),
        403,
    )
    # Even a genuine token names its tenant: one minted for acme does not reach globex's job.
    genuine_elsewhere = mint(forged_claim, get_settings())
    refused(await client.post(f"/v1/attempt-callbacks/{genuine_elsewhere}/heartbeat"), 404)
    assert (
        await client.post(callback_path(service.calls[0], "fail"), json={"message": "stop"})
    ).status_code == 202
    await worker
    theirs_now = await wait_job(client, other_auth, theirs)
    assert theirs_now["output"]["filename"] != "x"  # demo.sleep's own file, untouched


async def test_the_outcome_of_an_attempt_is_taken_once(
    client: httpx.AsyncClient, auth: dict[str, str], service: FakeReportService, async_type: str, env: Any
) -> None:
    await env.set(HTTP_REPORT_ALLOWED_HOSTS="127.0.0.1", STUCK_AFTER_S="40")  # the worker beats every 10 s
    job_id, worker = await started(client, auth, service, async_type)
    call = service.calls[0]
    first = await client.post(callback_path(call, "fail"), json={"message": "broken", "retryable": False})
    second = await client.post(callback_path(call, "complete"), params={"filename": "a.csv"}, content=b"a")
    assert first.status_code == 202
    assert second.status_code in (409, 410), second.text  # 409 while the worker has not acted yet
    await worker
    assert (await wait_job(client, auth, job_id))["status"] == "dead"


async def test_an_upload_over_the_limit_is_refused_and_stores_nothing(
    client: httpx.AsyncClient, auth: dict[str, str], service: FakeReportService, async_type: str, env: Any
) -> None:
    await env.set(HTTP_REPORT_ALLOWED_HOSTS="127.0.0.1", ATTEMPT_UPLOAD_MAX_BYTES="100")
    job_id, worker = await started(client, auth, service, async_type)
    call = service.calls[0]
    refused(
        await client.post(
            callback_path(call, "complete"), params={"filename": "big.csv"}, content=b"x" * 101
        ),
        413,
    )
    ok = await client.post(
        callback_path(call, "complete"), params={"filename": "small.csv"}, content=b"x" * 100
    )
    assert ok.status_code == 202, ok.text
    await worker
    job = await wait_job(client, auth, job_id)
    assert job["status"] == "done" and job["output"]["size"] == 100


async def test_a_cancel_is_answered_on_the_services_next_heartbeat_and_ends_the_job_cancelled(
    client: httpx.AsyncClient, auth: dict[str, str], service: FakeReportService, async_type: str
) -> None:
    job_id, worker = await started(client, auth, service, async_type)
    call = service.calls[0]
    assert (await client.post(callback_path(call, "heartbeat"))).json() == {"cancel": False}
    await cancel(client, auth, job_id)
    beat = await client.post(callback_path(call, "heartbeat"))
    assert beat.status_code in (200, 410) and beat.json()["cancel"] is True
    await worker
    job = await wait_job(client, auth, job_id)
    assert job["status"] == "cancelled", job
    assert (
        refused(await client.post(callback_path(call, "progress"), json={"progress": 0.9}), 410)["cancel"]
        is True
    )


async def test_bad_bodies_are_422_problems(
    client: httpx.AsyncClient, auth: dict[str, str], service: FakeReportService, async_type: str
) -> None:
    job_id, worker = await started(client, auth, service, async_type)
    call = service.calls[0]
    refused(await client.post(callback_path(call, "progress"), json={"progress": 2}), 422)
    refused(await client.post(callback_path(call, "fail"), json={"message": ""}), 422)
    refused(await client.post(callback_path(call, "complete"), content=b"no name"), 422)
    refused(await client.post("/v1/attempt-callbacks/not-a-token/heartbeat"), 403)
    assert (await client.post(callback_path(call, "fail"), json={"message": "stop"})).status_code == 202
    await worker
    assert (await wait_job(client, auth, job_id))["status"] == "dead"
