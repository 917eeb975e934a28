"""A claimed message runs as arq's own run_job would run it (app/dispatch/running.py), against a real Redis:
the claim script counts its tries, reads its body and takes an abort request; what follows is arq's behaviour.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from arq import Retry, create_pool
from arq.connections import ArqRedis
from arq.constants import abort_jobs_ss, in_progress_key_prefix, job_key_prefix, retry_key_prefix
from arq.jobs import Job, JobResult
from arq.utils import timestamp_ms
from arq.worker import func

from app.core.config import get_settings
from app.core.redis_pool import redis_settings
from workers.base import OrchestratorWorker

QUEUE = "test:running"


async def arq_pool() -> ArqRedis:
    """A pool with arq's own serializer (pickle), so results that hold exceptions read back as arq's do."""
    return await create_pool(redis_settings(get_settings()), default_queue_name=QUEUE)


@pytest.fixture
async def pool(env: Any) -> AsyncIterator[ArqRedis]:
    """The test's own connection to the queue's Redis (the worker gets another: it closes its pool)."""
    async with await arq_pool() as opened:
        yield opened


async def run_until_empty(*functions: Any, **options: Any) -> OrchestratorWorker:
    """A burst worker on QUEUE (time order, as the dead-letter consumer's) that keeps results for a minute."""
    worker = OrchestratorWorker(
        functions=list(functions),
        redis_pool=await arq_pool(),  # the worker closes it
        queue_name=QUEUE,
        burst=True,
        poll_delay=0.01,
        handle_signals=False,
        keep_result=60,
        **options,
    )
    try:
        await asyncio.wait_for(worker.main(), 20)
    finally:
        await worker.close()
    return worker


async def enqueue(pool: ArqRedis, function: str, *args: Any, **options: Any) -> str:
    job = await pool.enqueue_job(function, *args, **options)
    assert job is not None
    return job.job_id


async def result_of(pool: ArqRedis, job_id: str) -> JobResult:
    info = await Job(job_id, pool, _queue_name=QUEUE).result_info()
    assert info is not None, f"no result kept for {job_id}"
    return info


async def leftovers(pool: ArqRedis, job_id: str) -> list[str]:
    """arq's keys of a message that must be gone once it has ended."""
    keys = [job_key_prefix + job_id, in_progress_key_prefix + job_id, retry_key_prefix + job_id]
    found = [key for key in keys if await pool.exists(key)]
    if await pool.zscore(QUEUE, job_id) is not None:
        found.append(QUEUE)
    return found


async def test_a_claimed_job_runs_with_arqs_context_and_keeps_its_result(pool: ArqRedis) -> None:
    seen: list[dict[str, Any]] = []

    async def report(ctx: dict[str, Any], rows: int) -> str:
        seen.append(ctx)
        return f"{rows} rows"

    before_ms = timestamp_ms()
    job_id = await enqueue(pool, "report", 3)
    worker = await run_until_empty(func(report, name="report"))
    assert len(seen) == 1
    ctx = seen[0]
    assert (ctx["job_id"], ctx["job_try"]) == (job_id, 1)
    assert before_ms - 1000 <= ctx["score"] <= timestamp_ms()
    assert ctx["enqueue_time"].timestamp() * 1000 >= before_ms - 1000
    result = await result_of(pool, job_id)
    assert (result.success, result.result, result.job_try, result.function) == (True, "3 rows", 1, "report")
    assert worker.jobs_complete == 1 and worker.jobs_failed == 0
    assert await leftovers(pool, job_id) == []


async def test_every_delivery_of_a_message_counts_one_more_try(pool: ArqRedis) -> None:
    tries: list[int] = []

    async def flaky(ctx: dict[str, Any]) -> int:
        tries.append(ctx["job_try"])
        if len(tries) < 3:
            raise Retry(defer=0.01)
        return len(tries)

    job_id = await enqueue(pool, "flaky")
    worker = await run_until_empty(func(flaky, name="flaky"))
    assert tries == [1, 2, 3]
    assert (await result_of(pool, job_id)).result == 3
    assert (worker.jobs_retried, worker.jobs_complete) == (2, 1)
    assert await leftovers(pool, job_id) == []


async def test_a_message_whose_body_expired_before_its_claim_ends_without_running(pool: ArqRedis) -> None:
    ran: list[str] = []

    async def report(ctx: dict[str, Any]) -> None:
        ran.append(ctx["job_id"])

    job_id = await enqueue(pool, "report")
    await pool.delete(job_key_prefix + job_id)  # its body's TTL ran out
    worker = await run_until_empty(func(report, name="report"))
    assert ran == []
    result = await result_of(pool, job_id)
    assert not result.success and "job expired" in str(result.result)
    assert worker.jobs_failed == 1
    assert await leftovers(pool, job_id) == []


async def test_a_body_that_cannot_be_read_fails_the_message(pool: ArqRedis) -> None:
    job_id = await enqueue(pool, "report")
    await pool.set(job_key_prefix + job_id, b"not a pickle")

    async def report(ctx: dict[str, Any]) -> None:
        raise AssertionError("an unreadable message must not run")

    worker = await run_until_empty(func(report, name="report"))
    assert worker.jobs_failed == 1
    assert await leftovers(pool, job_id) == []


async def test_an_unknown_function_fails_the_message_as_in_arq(pool: ArqRedis) -> None:
    async def report(ctx: dict[str, Any]) -> None:
        return None

    job_id = await enqueue(pool, "no_such_report")
    worker = await run_until_empty(func(report, name="report"))
    result = await result_of(pool, job_id)
    assert not result.success and "function 'no_such_report' not found" in str(result.result)
    assert worker.jobs_failed == 1
    assert await leftovers(pool, job_id) == []


async def test_a_try_count_carried_by_the_message_past_max_tries_fails_it_unrun(pool: ArqRedis) -> None:
    async def report(ctx: dict[str, Any]) -> None:
        raise AssertionError("past max_tries it must not run")

    job_id = await enqueue(pool, "report", _job_try=5)
    await run_until_empty(func(report, name="report", max_tries=2))
    result = await result_of(pool, job_id)
    assert not result.success and "max 2 retries exceeded" in str(result.result)
    assert result.job_try == 5


async def test_an_abort_asked_before_the_start_ends_the_job_unrun(pool: ArqRedis) -> None:
    async def report(ctx: dict[str, Any]) -> None:
        raise AssertionError("an aborted job must not start")

    job_id = await enqueue(pool, "report")
    await pool.zadd(abort_jobs_ss, {job_id: timestamp_ms()})
    worker = await run_until_empty(func(report, name="report"), allow_abort_jobs=True)
    result = await result_of(pool, job_id)
    assert not result.success and isinstance(result.result, asyncio.CancelledError)
    assert worker.jobs_failed == 1
    assert await pool.zscore(abort_jobs_ss, job_id) is None


async def test_a_job_past_its_timeout_is_cancelled_and_failed(pool: ArqRedis) -> None:
    async def slow(ctx: dict[str, Any]) -> None:
        await asyncio.sleep(5)

    job_id = await enqueue(pool, "slow")
    worker = await run_until_empty(func(slow, name="slow", timeout=0.05, max_tries=1))
    result = await result_of(pool, job_id)
    assert not result.success and isinstance(result.result, TimeoutError)
    assert worker.jobs_failed == 1
    assert await leftovers(pool, job_id) == []


@pytest.mark.parametrize("log_level", ["INFO", "WARNING"])
async def test_arqs_per_job_lines_are_written_only_when_its_logger_wants_them(
    pool: ArqRedis, log_level: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def report(ctx: dict[str, Any]) -> str:
        return "fine"

    caplog.set_level(log_level, logger="arq.worker")
    await enqueue(pool, "report")
    await run_until_empty(func(report, name="report"))
    lines = [r.getMessage() for r in caplog.records if r.name == "arq.worker" and "report" in r.getMessage()]
    if log_level == "INFO":
        assert any("→" in line for line in lines) and any("← " in line and "fine" in line for line in lines)
    else:
        assert lines == []
