"""Cancel of a running job against real MariaDB, Redis and an arq worker: a request its worker notices at the
next heartbeat, shown on the job from the 202 on, and on the attempt whether it was honoured or came too late.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import httpx

from app.attempts import group_commit, service
from tests.utils.jobs import cancel, get_attempts, get_job, parse_ts, submit_id, submit_many, wait_job
from tests.utils.workers import drain


async def start_worker() -> asyncio.Task[None]:
    return asyncio.create_task(drain(burst=False, timeout_s=60))


async def stop_worker(worker: asyncio.Task[None]) -> None:
    worker.cancel()
    await asyncio.gather(worker, return_exceptions=True)


async def test_the_202_of_a_cancel_of_a_running_job_already_shows_the_request_and_when(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(STUCK_AFTER_S="1")
    job_id = await submit_id(client, auth, "demo.sleep", seconds=30)
    worker = await start_worker()
    try:
        await wait_job(client, auth, job_id, {"running"})
        asked_at = datetime.now(UTC)
        answer = await cancel(client, auth, job_id)
        read_back = await get_job(client, auth, job_id)
        await wait_job(client, auth, job_id, {"cancelled"}, within_s=10)
    finally:
        await stop_worker(worker)
    assert answer["status"] == "running" and answer["cancel_requested"] is True
    assert abs((parse_ts(answer["cancel_requested_at"]) - asked_at).total_seconds()) < 5
    assert read_back["cancel_requested"] is True
    assert read_back["cancel_requested_at"] == answer["cancel_requested_at"]


async def test_a_running_job_that_finishes_before_its_next_heartbeat_ends_done_with_the_late_request_shown(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(STUCK_AFTER_S="40")  # heartbeat every 10 s: the 1.5 s report ends before the first one
    job_id = await submit_id(client, auth, "demo.sleep", seconds=1.5)
    worker = await start_worker()
    try:
        await wait_job(client, auth, job_id, {"running"})
        answer = await cancel(client, auth, job_id)
        again = await cancel(client, auth, job_id)  # a second request keeps the first one's time
        done = await wait_job(client, auth, job_id, {"done", "cancelled"}, within_s=10)
    finally:
        await stop_worker(worker)
    assert answer["status"] == "running" and answer["cancel_requested"] is True
    assert again["cancel_requested_at"] == answer["cancel_requested_at"]
    assert done["status"] == "done" and done["output"] is not None
    assert done["cancel_requested"] is True
    assert done["cancel_requested_at"] == answer["cancel_requested_at"]
    [attempt] = await get_attempts(client, auth, job_id)
    assert attempt["outcome"] == "succeeded"
    assert attempt["cancel_requested_at"] == answer["cancel_requested_at"]
    assert attempt["finished_before_cancel"] is True


async def test_a_cancel_noticed_at_a_heartbeat_ends_the_job_and_its_attempt_cancelled(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(STUCK_AFTER_S="1")  # heartbeat every 0.25 s
    job_id = await submit_id(client, auth, "demo.sleep", seconds=30)
    worker = await start_worker()
    try:
        await wait_job(client, auth, job_id, {"running"})
        answer = await cancel(client, auth, job_id)
        ended = await wait_job(client, auth, job_id, {"done", "cancelled"}, within_s=10)
    finally:
        await stop_worker(worker)
    assert ended["status"] == "cancelled" and ended["output"] is None
    assert ended["cancel_requested"] is True
    assert ended["cancel_requested_at"] == answer["cancel_requested_at"]
    [attempt] = await get_attempts(client, auth, job_id)
    assert attempt["outcome"] == "cancelled"
    assert attempt["cancel_requested_at"] == answer["cancel_requested_at"]
    assert attempt["finished_before_cancel"] is False


async def test_a_run_that_fails_before_it_sees_the_cancel_ends_the_job_cancelled_without_a_retry(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    # Heartbeat every 10 s, time limit 1.5 s: the attempt times out (retryable) before it sees the request.
    await env.set(STUCK_AFTER_S="40", JOB_TIMEOUT_S="1.5", RETRY_DELAYS_S="[0.1]")
    job_id = await submit_id(client, auth, "demo.sleep", seconds=30)
    worker = await start_worker()
    try:
        await wait_job(client, auth, job_id, {"running"})
        answer = await cancel(client, auth, job_id)
        ended = await wait_job(client, auth, job_id, {"done", "dead", "cancelled"}, within_s=10)
        await asyncio.sleep(0.5)  # past the backoff: a retry would have started by now
    finally:
        await stop_worker(worker)
    assert ended["status"] == "cancelled" and ended["attempt"] == 1
    assert ended["last_error"]["type"] == "TimeoutError"
    assert ended["cancel_requested_at"] == answer["cancel_requested_at"]
    [attempt] = await get_attempts(client, auth, job_id)
    assert attempt["outcome"] == "timed_out" and attempt["finished_before_cancel"] is True


async def test_successes_committed_together_mark_only_the_attempts_that_had_a_cancel_request(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    """The cancel marks the running attempt's row itself: successes committed together need no statement more,
    and only the attempts that were asked show the request."""
    job_ids = await submit_many(client, auth, [{"report_type": "demo.csv", "params": {"rows": 1}}] * 6)
    decisions = await asyncio.gather(*(group_commit.start_attempt(job_id, "host:1") for job_id in job_ids))
    keys = [d.key for d in decisions if isinstance(d, service.Started)]
    assert len(keys) == 6, decisions
    asked = {
        job_ids[1]: await cancel(client, auth, job_ids[1]),
        job_ids[4]: await cancel(client, auth, job_ids[4]),
    }
    flushes_before = group_commit.group_stats()["success_flushes"]
    assert await asyncio.gather(*(group_commit.complete_attempt(key, None) for key in keys)) == [True] * 6
    assert group_commit.group_stats()["success_flushes"] - flushes_before <= 2
    for job_id in job_ids:
        job = await get_job(client, auth, job_id)
        [attempt] = await get_attempts(client, auth, job_id)
        assert job["status"] == "done" and attempt["outcome"] == "succeeded"
        expected_at = asked[job_id]["cancel_requested_at"] if job_id in asked else None
        assert job["cancel_requested"] is (job_id in asked)
        assert job["cancel_requested_at"] == attempt["cancel_requested_at"] == expected_at
        assert attempt["finished_before_cancel"] is (job_id in asked)


async def test_a_waiting_job_cancelled_at_once_shows_the_request_and_a_replay_clears_it(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_id = await submit_id(client, auth, "demo.csv", rows=1)
    answer = await cancel(client, auth, job_id)
    assert answer["status"] == "cancelled" and answer["cancel_requested"] is True
    assert answer["cancel_requested_at"] == answer["finished_at"]
    replayed = await client.post(f"/v1/jobs/{job_id}/replay", headers=auth)
    assert replayed.status_code == 202, replayed.text
    assert replayed.json()["cancel_requested"] is False and replayed.json()["cancel_requested_at"] is None
    await drain()
    done = await get_job(client, auth, job_id)
    assert done["status"] == "done" and done["cancel_requested"] is False
    [attempt] = await get_attempts(client, auth, job_id)
    assert attempt["cancel_requested_at"] is None and attempt["finished_before_cancel"] is False
