"""Runs a message the claim script has already read: arq's `Worker.run_job`, less its round trip per job.

arq's run_job starts with a MULTI/EXEC of its own (read the message, count the try, drop an abort request);
our claim scripts (claiming.py) do those three in the claim itself, so a job starts one Redis round trip
sooner. From there on this follows arq 0.28's run_job step for step, through arq's own helpers.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from arq.constants import keep_cronjob_progress, retry_key_prefix
from arq.jobs import SerializationError, deserialize_job_raw, serialize_result
from arq.utils import args_to_string, ms_to_datetime, timestamp_ms, truncate
from arq.worker import JobExecutionFailed, Retry, RetryJob, Worker, no_result

from app.core import failpoints
from app.dispatch.scripts import RETRY_KEY_TTL_S

# arq's own logger, so its lines (and their levels, app/core/logs.py) stay as arq writes them.
log = logging.getLogger("arq.worker")


@dataclass(frozen=True)
class Claimed:
    """One message as the claim script hands it over."""

    job_id: str  # arq's job id
    score: int  # when it was due (ms)
    payload: bytes | None  # the message; None when it expired before the claim read it
    job_try: int  # arq's try count, this delivery included
    aborted: bool  # an abort was requested before it started (only with `allow_abort_jobs`)


async def run_claimed(worker: Worker, job: Claimed) -> None:
    """arq's run_job from the point its pipeline returns; `worker` supplies the functions and settings."""
    await failpoints.hit("claim.after_claim")
    job_id, score, job_try = job.job_id, job.score, job.job_try
    start_ms = timestamp_ms()
    function_name, enqueue_time_ms = "<unknown>", 0
    args: tuple[Any, ...] = ()
    kwargs: dict[Any, Any] = {}

    ref: str | None = None  # arq's name for the job in its lines and results, once the function is known

    def serialized(success: bool, result: Any, finished_ms: int | None = None) -> bytes | None:
        """arq's result document, from what is known of the job so far."""
        return serialize_result(
            function_name,
            args,
            kwargs,
            job_try,
            enqueue_time_ms,
            success,
            result,
            start_ms,
            timestamp_ms() if finished_ms is None else finished_ms,
            ref or f"{job_id}:{function_name}",
            worker.queue_name,
            job_id=job_id,
            serializer=worker.job_serializer,
        )

    async def job_failed(exc: BaseException) -> None:
        worker.jobs_failed += 1
        await asyncio.shield(worker.finish_failed_job(job_id, serialized(False, exc)))

    if not job.payload:
        log.warning("job %s expired", job_id)
        return await job_failed(JobExecutionFailed("job expired"))
    try:
        function_name, args, kwargs, enqueue_job_try, enqueue_time_ms = deserialize_job_raw(
            job.payload, deserializer=worker.job_deserializer
        )
    except SerializationError as exc:
        log.exception("deserializing job %s failed", job_id)
        return await job_failed(exc)
    if job.aborted:
        since_s = (timestamp_ms() - enqueue_time_ms) / 1000
        log.info("%6.2fs ⊘ %s:%s aborted before start", since_s, job_id, function_name)
        return await job_failed(asyncio.CancelledError())
    function = worker.functions.get(function_name)
    if function is None:
        log.warning("job %s, function %r not found", job_id, function_name)
        return await job_failed(JobExecutionFailed(f"function {function_name!r} not found"))

    if hasattr(function, "next_run"):  # an arq cron job
        ref, keep_in_progress = function_name, keep_cronjob_progress
    else:
        ref, keep_in_progress = f"{job_id}:{function_name}", None
    if enqueue_job_try and enqueue_job_try > job_try:
        job_try = enqueue_job_try
        await worker.pool.setex(retry_key_prefix + job_id, RETRY_KEY_TTL_S, str(job_try))
    max_tries = worker.max_tries if function.max_tries is None else function.max_tries
    if job_try > max_tries:
        since_s = (timestamp_ms() - enqueue_time_ms) / 1000
        log.warning("%6.2fs ! %s max retries %d exceeded", since_s, ref, max_tries)
        return await job_failed(JobExecutionFailed(f"max {max_tries} retries exceeded"))

    result: Any = no_result
    finish = False
    timeout_s = worker.job_timeout_s if function.timeout_s is None else function.timeout_s
    incr_score: int | None = None
    enqueued_at = ms_to_datetime(enqueue_time_ms)
    ctx = {**worker.ctx, "job_id": job_id, "job_try": job_try, "enqueue_time": enqueued_at, "score": score}
    if worker.on_job_start:
        await worker.on_job_start(ctx)

    start_ms = timestamp_ms()
    success = False
    verbose = log.isEnabledFor(logging.INFO)
    try:
        if verbose:
            extra = f" try={job_try}" if job_try > 1 else ""
            if (start_ms - score) > 1200:
                extra += f" delayed={(start_ms - score) / 1000:0.2f}s"
            since_s = (start_ms - enqueue_time_ms) / 1000
            log.info("%6.2fs → %s(%s)%s", since_s, ref, args_to_string(args, kwargs), extra)
        worker.job_tasks[job_id] = task = worker.loop.create_task(function.coroutine(ctx, *args, **kwargs))
        try:
            result = await asyncio.wait_for(task, timeout_s)
        finally:
            del worker.job_tasks[job_id]
        # Inside the try, as in arq: a repr() that raises fails the job instead of the worker.
        shown = "" if not verbose or result is None or not worker.log_results else truncate(repr(result))
    except (Exception, asyncio.CancelledError) as exc:
        finished_ms = timestamp_ms()
        took_s = (finished_ms - start_ms) / 1000
        if worker.retry_jobs and isinstance(exc, Retry):
            incr_score = exc.defer_score
            log.info("%6.2fs ↻ %s retrying job in %0.2fs", took_s, ref, (exc.defer_score or 0) / 1000)
            if exc.defer_score:
                incr_score = exc.defer_score + (timestamp_ms() - score)
            worker.jobs_retried += 1
        elif job_id in worker.aborting_tasks and isinstance(exc, asyncio.CancelledError):
            log.info("%6.2fs ⊘ %s aborted", took_s, ref)
            result, finish = exc, True
            worker.aborting_tasks.remove(job_id)
            worker.jobs_failed += 1
        elif worker.retry_jobs and isinstance(exc, asyncio.CancelledError | RetryJob):
            log.info("%6.2fs ↻ %s cancelled, will be run again", took_s, ref)
            worker.jobs_retried += 1
        else:
            extra_info = getattr(exc, "extra", None)
            if callable(extra_info):
                extra_info = extra_info()
            what = type(exc).__name__
            log.exception("%6.2fs ! %s failed, %s: %s", took_s, ref, what, exc, extra={"extra": extra_info})
            result, finish = exc, True
            worker.jobs_failed += 1
    else:
        success, finish = True, True
        finished_ms = timestamp_ms()
        if verbose:
            log.info("%6.2fs ← %s ● %s", (finished_ms - start_ms) / 1000, ref, shown)
        worker.jobs_complete += 1

    keep_result_forever = (
        worker.keep_result_forever if function.keep_result_forever is None else function.keep_result_forever
    )
    result_timeout_s = worker.keep_result_s if function.keep_result_s is None else function.keep_result_s
    result_data = None
    if result is not no_result and (keep_result_forever or result_timeout_s > 0):
        result_data = serialized(success, result, finished_ms)
    if worker.on_job_end:
        await worker.on_job_end(ctx)
    await asyncio.shield(
        worker.finish_job(
            job_id, finish, result_data, result_timeout_s, keep_result_forever, incr_score, keep_in_progress
        )
    )
