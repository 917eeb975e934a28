"""The core flow against real MariaDB, Redis and arq workers: submit → run → retry → done or dead."""

from __future__ import annotations

import asyncio
import csv
import io
import time
from typing import Any

import httpx
from sqlalchemy import func, select

from app.core.config import get_settings
from app.core.db import session_scope
from app.core.redis_pool import get_pool
from app.dispatch import capacity, queue
from app.dispatch.lanes import Lane
from app.models import DeadLetter, JobAttempt
from tests.utils.jobs import get_attempts, get_job, submit_id
from tests.utils.workers import drain


async def test_demo_csv_job_ends_done_with_the_right_file(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_id = await submit_id(client, auth, "demo.csv", rows=2500)
    assert (await get_job(client, auth, job_id))["status"] == "pending"
    await drain()
    body = await get_job(client, auth, job_id)
    assert body["status"] == "done"
    assert body["attempt"] == 1 and body["progress"] == 1.0 and body["last_error"] is None
    assert body["output"]["url"] == f"/v1/jobs/{job_id}/output"
    resp = await client.get(body["output"]["url"], headers=auth)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/csv")
    assert f'filename="demo-{job_id}.csv"' in resp.headers["content-disposition"]
    rows = list(csv.reader(io.StringIO(resp.text)))
    assert rows[0] == ["id", "name", "value"]
    assert len(rows) == 2501 and rows[-1][0] == "2500"
    assert int(resp.headers["content-length"]) == body["output"]["size"]


async def test_flaky_job_succeeds_on_attempt_3_with_gaps_following_retry_delays(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_id = await submit_id(client, auth, "demo.flaky", fail_times=2)
    await drain()
    body = await get_job(client, auth, job_id)
    assert body["status"] == "done" and body["attempt"] == 3
    rows = await get_attempts(client, auth, job_id)
    assert [r["attempt"] for r in rows] == [1, 2, 3]
    assert [r["outcome"] for r in rows] == ["failed", "failed", "succeeded"]
    assert rows[0]["error"]["type"] == "RuntimeError" and rows[0]["error"]["retryable"] is True
    delays = [0.2, 0.4]
    from datetime import datetime

    def ts(value: str) -> datetime:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))

    for i, delay in enumerate(delays):
        gap = (ts(rows[i + 1]["started_at"]) - ts(rows[i]["finished_at"])).total_seconds()
        assert delay - 0.02 <= gap <= delay + 1.0, (i, gap)


async def test_permanent_failure_is_dead_after_one_attempt_with_its_dead_letter(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_id = await submit_id(client, auth, "demo.flaky", fail_times=5, permanent=True)
    await drain()
    body = await get_job(client, auth, job_id)
    assert body["status"] == "dead" and body["attempt"] == 1
    assert body["last_error"]["type"] == "PermanentError" and body["last_error"]["retryable"] is False
    assert [r["outcome"] for r in await get_attempts(client, auth, job_id)] == ["failed"]
    async with session_scope() as session:
        letters = (
            (await session.execute(select(DeadLetter).where(DeadLetter.job_id == job_id))).scalars().all()
        )
    assert len(letters) == 1
    assert letters[0].attempts == 1 and letters[0].error == body["last_error"]
    assert letters[0].tenant == "acme" and letters[0].params == {"fail_times": 5, "permanent": False} | {
        "permanent": True
    }


async def test_timeout_is_retried_then_dead(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(JOB_TIMEOUT_S="0.3")
    resp = await client.post(
        "/v1/jobs",
        json={"report_type": "demo.sleep", "params": {"seconds": 10}, "max_attempts": 2},
        headers=auth,
    )
    job_id = resp.json()["id"]
    await drain()
    body = await get_job(client, auth, job_id)
    assert body["status"] == "dead" and body["attempt"] == 2
    assert body["last_error"]["type"] == "TimeoutError" and body["last_error"]["retryable"] is True
    assert [r["outcome"] for r in await get_attempts(client, auth, job_id)] == ["timed_out", "timed_out"]


async def test_exhausted_budget_goes_dead_after_max_attempts(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_id = await submit_id(client, auth, "demo.flaky", fail_times=10)
    await drain()
    body = await get_job(client, auth, job_id)
    assert body["status"] == "dead" and body["attempt"] == 4 and body["max_attempts"] == 4
    assert [r["outcome"] for r in await get_attempts(client, auth, job_id)] == ["failed"] * 4


async def test_same_job_delivered_to_two_workers_at_once_runs_once(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_id = await submit_id(client, auth, "demo.sleep", seconds=0.5)
    # A second, independent delivery of the same report job: an enqueue adds none (one message per job), so
    # it is written beside that bookkeeping, as a message an older release queued would be.
    await (await get_pool()).hdel("ro:d:msg", job_id)
    assert await queue.enqueue_run(job_id, 0, suffix="duplicate", lane=Lane(5, "acme", "demo.sleep"))
    await drain(workers=2)
    body = await get_job(client, auth, job_id)
    assert body["status"] == "done" and body["attempt"] == 1
    async with session_scope() as session:
        count = (
            await session.execute(
                select(func.count()).select_from(JobAttempt).where(JobAttempt.job_id == job_id)
            )
        ).scalar_one()
    assert count == 1


async def test_stale_attempt_cannot_overwrite_a_newer_one(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    from app.attempts import service
    from app.core.states import AttemptKey, AttemptOutcome

    job_id = await submit_id(client, auth, "demo.csv", rows=1)
    started = await service.start_attempt(job_id, "w1")
    assert isinstance(started, service.Started)
    # The first attempt fails and is retried; a second one starts.
    await service.fail_attempt(started.key, AttemptOutcome.FAILED, service.error_dict("X", "boom", True))
    await asyncio.sleep(0.25)
    second = await service.start_attempt(job_id, "w2")
    assert isinstance(second, service.Started) and second.key.attempt == 2
    # A late result from attempt 1 is discarded, whatever it says.
    assert await service.complete_attempt(AttemptKey(job_id, 1, 0), None) is False
    late_fail = await service.fail_attempt(
        AttemptKey(job_id, 1, 0), AttemptOutcome.FAILED, service.error_dict("X", "late", False)
    )
    assert late_fail.applied is False
    assert (await get_job(client, auth, job_id))["status"] == "running"
    assert await service.complete_attempt(second.key, None) is True
    assert (await get_job(client, auth, job_id))["status"] == "done"


async def test_wait_long_polls_until_the_job_is_terminal(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_id = await submit_id(client, auth, "demo.sleep", seconds=0.3)
    worker = asyncio.create_task(drain())
    resp = await client.get(f"/v1/jobs/{job_id}", params={"wait": 10}, headers=auth)
    await worker
    assert resp.status_code == 200 and resp.json()["status"] == "done"


async def test_pending_job_whose_message_is_held_by_a_dead_worker_lease_still_runs(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    """A worker killed right after claiming a message leaves arq's in-progress lease for minutes and holds
    a slot: the job is pending, its message unrunnable. After STUCK_AFTER_S the scheduler frees the slot,
    drops the message and enqueues a fresh one."""
    from app.dispatch import claiming, lanes
    from app.maintenance import service as maintenance

    await env.set(STUCK_AFTER_S="0.5", SCAN_INTERVAL_S="0.2")
    job_id = await submit_id(client, auth, "demo.csv", rows=1)
    await capacity.rebuild_dispatch([], lanes.Policy())
    scripts = lanes.Scripts(await get_pool())
    now_ms = int(time.time() * 1000)
    claimed = await claiming.claim(scripts, get_settings().queue_name, now_ms, 10, 600_000)  # then it dies
    assert [job.job_id for job in claimed.jobs] == [f"{job_id}:0"]
    await asyncio.sleep(0.6)
    assert (await get_job(client, auth, job_id))["status"] == "pending"
    tick = await maintenance.run_tick(use_lease=False)
    assert (tick["slots_freed"], tick["reenqueued"]) == (1, 1), tick
    worker = asyncio.create_task(drain(burst=False, timeout_s=30))
    try:
        resp = await client.get(f"/v1/jobs/{job_id}", params={"wait": 10}, headers=auth)
    finally:
        worker.cancel()
    assert resp.json()["status"] == "done"
