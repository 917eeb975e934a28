"""Workers that die (SIGKILL) or are stopped (SIGTERM) in the middle of a job, for real."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from tests.utils.jobs import get_attempts, get_job, parse_ts, submit_id, wait_job
from tests.utils.polling import eventually
from tests.utils.stack import SCAN_INTERVAL_S, STUCK_AFTER_S, Stack

pytestmark = pytest.mark.timeout(120)


async def running_worker_pid(stack: Stack, job_id: str, within_s: float = 15) -> int:
    """Wait until the job runs; the PID of the worker process running it."""
    pid = await eventually(lambda: stack.job_worker_pid(job_id), within_s, f"job {job_id} running", 0.05)
    return int(pid)


async def test_sigkilled_worker_mid_job_ends_done_with_one_lost_attempt(stack: Stack) -> None:
    stack.start_api()
    workers = [stack.start_worker(), stack.start_worker()]
    stack.start_scheduler()
    async with stack.client() as client:
        job_id = await submit_id(client, None, "demo.sleep", seconds=2)
        pid = await running_worker_pid(stack, job_id)
        victim = stack.proc_by_pid(pid)
        assert victim in workers, f"job {job_id} runs in pid {pid}, not one of our workers"
        killed_at = datetime.now(UTC)
        victim.kill()

        job = await wait_job(client, None, job_id, within_s=30)
        assert job["status"] == "done", job
        history = await get_attempts(client, None, job_id)

    assert [a["outcome"] for a in history] == ["lost", "succeeded"], history
    lost, succeeded = history
    assert lost["error"]["type"] == "LostWorker", lost
    assert lost["worker"] is not None and lost["worker"].endswith(f":{pid}")
    survivor = next(w for w in workers if w is not victim)
    assert succeeded["worker"] is not None and succeeded["worker"].endswith(f":{survivor.pid}")
    assert job["attempt"] == 2
    declared_after_s = (parse_ts(lost["finished_at"]) - killed_at).total_seconds()
    bound_s = STUCK_AFTER_S + 2 * SCAN_INTERVAL_S + 1.0
    assert 0 < declared_after_s <= bound_s, (declared_after_s, bound_s)


async def test_sigterm_mid_job_burns_no_attempt(stack: Stack) -> None:
    stack.start_api()
    stack.start_scheduler()
    worker = stack.start_worker(WORKER_SHUTDOWN_GRACE_S="1")
    async with stack.client() as client:
        job_id = await submit_id(client, None, "demo.sleep", seconds=6)
        pid = await running_worker_pid(stack, job_id)
        assert pid == worker.pid
        code = await asyncio.to_thread(worker.terminate, 15)
        assert code == 0, worker.tail()

        job = await get_job(client, None, job_id)
        assert job["status"] == "pending" and job["attempt"] == 0, job
        [handed_back] = await get_attempts(client, None, job_id)
        assert handed_back["outcome"] == "superseded", handed_back
        assert handed_back["error"]["type"] == "WorkerShutdown", handed_back

        replacement = stack.start_worker()
        job = await wait_job(client, None, job_id, within_s=30)
        history = await get_attempts(client, None, job_id)

    assert job["status"] == "done" and job["attempt"] == 1, job
    assert [a["outcome"] for a in history] == ["superseded", "succeeded"], history
    assert [a["attempt"] for a in history] == [1, 1], history
    assert history[1]["worker"].endswith(f":{replacement.pid}")


async def test_sigterm_lets_a_short_job_finish_within_the_grace_period(stack: Stack) -> None:
    stack.start_api()
    worker = stack.start_worker(WORKER_SHUTDOWN_GRACE_S="10")
    async with stack.client() as client:
        job_id = await submit_id(client, None, "demo.sleep", seconds=1.5)
        pid = await running_worker_pid(stack, job_id)
        assert pid == worker.pid
        code = await asyncio.to_thread(worker.terminate, 20)
        assert code == 0, worker.tail()

        job = await get_job(client, None, job_id)
        history = await get_attempts(client, None, job_id)

    assert job["status"] == "done" and job["attempt"] == 1, job
    assert [a["outcome"] for a in history] == ["succeeded"], history
