"""Scheduled jobs, cancellation and completion callbacks against real MariaDB, Redis and arq workers."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from app.maintenance import service as maintenance
from tests.utils.fakes.receiver import Receiver
from tests.utils.jobs import parse_ts, submit
from tests.utils.workers import drain, drain_alerts


async def get(client: httpx.AsyncClient, auth: dict[str, str], job_id: str, path: str = "") -> Any:
    resp = await client.get(f"/v1/jobs/{job_id}{path}", headers=auth)
    assert resp.status_code == 200, resp.text
    return resp.json()


async def running_worker() -> asyncio.Task[None]:
    return asyncio.create_task(drain(burst=False, timeout_s=60))


# ---- scheduled jobs ------------------------------------------------------------------------------


async def test_scheduled_job_starts_not_before_run_at_and_shortly_after(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    run_at = datetime.now(UTC) + timedelta(seconds=1.0)
    job = await submit(client, auth, "demo.csv", job={"run_at": run_at.isoformat()}, rows=1)
    assert job["status"] == "scheduled" and parse_ts(job["run_at"]) == run_at
    worker = await running_worker()
    try:
        done = (await client.get(f"/v1/jobs/{job['id']}", params={"wait": 10}, headers=auth)).json()
    finally:
        worker.cancel()
    assert done["status"] == "done"
    [attempt] = await get(client, auth, job["id"], "/attempts")
    started = parse_ts(attempt["started_at"])
    assert started >= run_at
    assert started - run_at < timedelta(seconds=1)


async def test_redis_flushed_while_scheduled_still_runs_on_time(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    run_at = datetime.now(UTC) + timedelta(seconds=1.2)
    job = await submit(client, auth, "demo.csv", job={"run_at": run_at.isoformat()}, rows=1)
    env.redis.flushall()
    assert (await maintenance.run_tick(use_lease=False))["reenqueued"] == 1
    worker = await running_worker()
    try:
        done = (await client.get(f"/v1/jobs/{job['id']}", params={"wait": 10}, headers=auth)).json()
    finally:
        worker.cancel()
    assert done["status"] == "done"
    [attempt] = await get(client, auth, job["id"], "/attempts")
    assert run_at <= parse_ts(attempt["started_at"]) < run_at + timedelta(seconds=1)


# ---- cancellation --------------------------------------------------------------------------------


async def test_cancelled_pending_and_scheduled_jobs_never_run(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    pending = await submit(client, auth, "demo.csv", rows=1)
    later = (datetime.now(UTC) + timedelta(seconds=0.5)).isoformat()
    scheduled = await submit(client, auth, "demo.csv", job={"run_at": later}, rows=1)
    for job in (pending, scheduled):
        resp = await client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth)
        assert resp.status_code == 202 and resp.json()["status"] == "cancelled"
    await asyncio.sleep(0.6)
    await drain()  # their queued messages remain in Redis: a worker must skip them
    for job in (pending, scheduled):
        assert (await get(client, auth, job["id"]))["status"] == "cancelled"
        assert await get(client, auth, job["id"], "/attempts") == []


async def test_cancelled_retrying_job_starts_no_further_attempt(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(RETRY_DELAYS_S="[1.0]")
    job = await submit(client, auth, "demo.flaky", fail_times=5)
    worker = await running_worker()
    try:
        for _ in range(100):
            if (await get(client, auth, job["id"]))["status"] == "retrying":
                break
            await asyncio.sleep(0.05)
        resp = await client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth)
        assert resp.status_code == 202 and resp.json()["status"] == "cancelled"
        await asyncio.sleep(1.5)  # past the backoff: the retry message fires and must be skipped
    finally:
        worker.cancel()
    assert (await get(client, auth, job["id"]))["status"] == "cancelled"
    assert [a["outcome"] for a in await get(client, auth, job["id"], "/attempts")] == ["failed"]


async def test_cancelled_running_job_stops_and_ends_cancelled(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(STUCK_AFTER_S="1")  # heartbeat every 0.25 s
    job = await submit(client, auth, "demo.sleep", seconds=30)
    worker = await running_worker()
    try:
        for _ in range(100):
            if (await get(client, auth, job["id"]))["status"] == "running":
                break
            await asyncio.sleep(0.05)
        resp = await client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth)
        assert resp.status_code == 202
        done = (await client.get(f"/v1/jobs/{job['id']}", params={"wait": 5}, headers=auth)).json()
    finally:
        worker.cancel()
    assert done["status"] == "cancelled"
    assert [a["outcome"] for a in await get(client, auth, job["id"], "/attempts")] == ["cancelled"]


async def test_cancel_of_a_terminal_job_is_409_and_cancelled_jobs_can_be_replayed(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job = await submit(client, auth, "demo.csv", rows=1)
    await drain()
    resp = await client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth)
    assert resp.status_code == 409 and resp.headers["content-type"] == "application/problem+json"
    other = await submit(client, auth, "demo.csv", rows=1)
    await client.post(f"/v1/jobs/{other['id']}/cancel", headers=auth)
    replayed = await client.post(f"/v1/jobs/{other['id']}/replay", headers=auth)
    assert replayed.status_code == 202 and replayed.json()["replay_count"] == 1
    await drain()
    assert (await get(client, auth, other["id"]))["status"] == "done"


# ---- completion callbacks ------------------------------------------------------------------------


async def test_callback_is_delivered_once_signed_for_each_terminal_status(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Receiver
) -> None:
    done = await submit(client, auth, "demo.csv", job={"callback_url": receiver.url}, rows=1)
    dead = await submit(
        client, auth, "demo.flaky", job={"callback_url": receiver.url}, fail_times=1, permanent=True
    )
    cancelled = await submit(client, auth, "demo.csv", job={"callback_url": receiver.url}, rows=1)
    await client.post(f"/v1/jobs/{cancelled['id']}/cancel", headers=auth)
    await drain()
    await drain_alerts()
    assert len(receiver.received) == 3 and all(d.signature_ok for d in receiver.received)
    by_job = {d.body["id"]: d for d in receiver.received}
    assert {job_id: d.body["status"] for job_id, d in by_job.items()} == {
        done["id"]: "done",
        dead["id"]: "dead",
        cancelled["id"]: "cancelled",
    }
    assert by_job[done["id"]].headers["x-report-event"] == "job.done"
    assert by_job[done["id"]].body["output"]["url"] == f"/v1/jobs/{done['id']}/output"
    assert len({d.headers["x-report-delivery"] for d in receiver.received}) == 3
    for job in (done, dead, cancelled):
        assert (await get(client, auth, job["id"]))["callback"] == {
            "status": "delivered",
            "attempts": 1,
            "last_error": None,
        }


async def test_receiver_failing_twice_then_200_gets_exactly_one_accepted_delivery(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Receiver
) -> None:
    receiver.script = ["http500", "hang"]
    job = await submit(client, auth, "demo.csv", job={"callback_url": receiver.url}, rows=1)
    await drain()
    await drain_alerts()
    assert [d.answered for d in receiver.received] == [500, 0, 200]
    assert len(receiver.accepted) == 1
    assert len({d.headers["x-report-delivery"] for d in receiver.received}) == 1  # one idempotency id
    body = await get(client, auth, job["id"])
    assert body["status"] == "done"
    assert body["callback"] == {"status": "delivered", "attempts": 3, "last_error": None}


async def test_receiver_never_answering_leaves_the_job_alone_and_the_callback_failed(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Receiver, env: Any
) -> None:
    await env.set(CALLBACK_MAX_ATTEMPTS=3)
    receiver.script = ["hang", "http500", "hang", "ok"]
    job = await submit(client, auth, "demo.csv", job={"callback_url": receiver.url}, rows=1)
    await drain()
    await drain_alerts()
    assert len(receiver.received) == 3 and receiver.accepted == []
    body = await get(client, auth, job["id"])
    assert body["status"] == "done" and body["output"] is not None
    assert body["callback"]["status"] == "failed" and body["callback"]["attempts"] == 3
    assert body["callback"]["last_error"]


async def test_callbacks_survive_a_redis_flush(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Receiver, env: Any
) -> None:
    job = await submit(client, auth, "demo.csv", job={"callback_url": receiver.url}, rows=1)
    await drain()
    env.redis.flushall()
    await drain_alerts()
    assert receiver.received == []
    assert (await maintenance.run_tick(use_lease=False))["callbacks_republished"] == 1
    await drain_alerts()
    assert [d.body["id"] for d in receiver.accepted] == [job["id"]]


async def test_private_or_metadata_callback_urls_are_422(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    for url in (
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/x",
        "http://192.168.0.10/x",
        "ftp://example.com/x",
        "http://user:pw@127.0.0.1/x",
    ):
        resp = await client.post(
            "/v1/jobs",
            headers=auth,
            json={"report_type": "demo.csv", "params": {"rows": 1}, "callback_url": url},
        )
        assert resp.status_code == 422, (url, resp.text)
        assert resp.json()["errors"][0]["loc"] == ["body", "callback_url"], url
    listing = await client.get("/v1/jobs", headers=auth)
    assert listing.json()["items"] == []
