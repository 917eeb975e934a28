"""Runs one delivery of a report job: start (CAS), the report under our timeout and heartbeat, finish (CAS).

Knows nothing of arq: it returns a `RunResult` that the worker turns into `Retry(defer=…)` or nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import Span
from pydantic import ValidationError
from tenacity import AsyncRetrying, retry_if_exception, stop_after_delay, wait_exponential

from app.attempts import group_commit, service
from app.attempts.steps import run_steps
from app.core import failpoints, tracing
from app.core.config import get_settings
from app.core.db import is_db_outage
from app.core.states import AttemptKey, AttemptOutcome, JobStatus
from app.models import ReportJob
from app.outputs import get_output_store
from app.reports.base import OutputInfo, PermanentError, ReportContext
from app.reports.declared import declarations
from app.reports.registry import ReportType, registry

log = logging.getLogger(__name__)

RECORD_OUTCOME_FOR_S = group_commit.RECORD_OUTCOME_FOR_S  # one figure: recording and the landed re-check
# How long a report that was cancelled (its time is up, or the worker stops) may take to end. One that ignores
# the cancel is left behind after that: its attempt is recorded as timed out (or handed back) all the same,
# well before arq's own limit (60 s above every report's timeout) would end the delivery and drop its message;
# a timed-out one still holds its delivery (message, slot) until it ends: no next attempt runs beside it.
CANCEL_GRACE_S = 5.0


@dataclass(frozen=True)
class RunResult:
    defer_s: float | None = None  # run this delivery again after that many seconds
    detail: str = ""


def record_retrying() -> AsyncRetrying:
    """Recording an outcome rides out a database outage; a SQL or schema bug is raised at once (retrying
    it for minutes only hides it)."""
    return AsyncRetrying(
        retry=retry_if_exception(is_db_outage),
        wait=wait_exponential(multiplier=0.1, max=5),
        stop=stop_after_delay(RECORD_OUTCOME_FOR_S),
        reraise=True,
    )


async def _heartbeat_loop(
    key: AttemptKey, ctx: ReportContext, task: asyncio.Task[Any], state: dict[str, str]
) -> None:
    """Beat now, then every HEARTBEAT_INTERVAL_S while the report runs (started one interval into it)."""
    interval_s = get_settings().heartbeat_interval_s
    first = True
    while not task.done():
        if not first:
            await asyncio.sleep(interval_s)
        first = False
        try:
            mine, cancel_requested = await service.heartbeat(key, ctx.progress)
        except Exception as exc:  # MySQL blip: keep running, the next beat may get through
            log.warning("heartbeat failed", extra={"job_id": key.job_id, "error": repr(exc)})
            continue
        if not mine:
            state["stopped"] = "superseded"
            task.cancel()
            return
        if cancel_requested:
            state["stopped"] = "cancelled"
            task.cancel()
            return


def classify(exc: BaseException) -> tuple[AttemptOutcome, dict[str, Any]]:
    if isinstance(exc, PermanentError | ValidationError):
        return AttemptOutcome.FAILED, service.error_dict(type(exc).__name__, str(exc), retryable=False)
    if isinstance(exc, TimeoutError):
        return AttemptOutcome.TIMED_OUT, service.error_dict("TimeoutError", str(exc) or "timed out", True)
    return AttemptOutcome.FAILED, service.error_dict(
        type(exc).__name__, str(exc) or repr(exc), retryable=True
    )


# The worker's check, once an attempt started, that its job holds its slot: 'ok' (run it), 'over',
# 'superseded' or 'unknown' (see app.fairshare.service.hold_slot).
SlotCheck = Callable[[ReportJob, AttemptKey], Awaitable[str]]
HANDBACKS = {
    "over": ("SlotLost", "its slot went with a Redis flush before it started, and a cap is full"),
    "unknown": ("SlotUnconfirmed", "Redis did not confirm its slot before it started"),
}


async def _not_held(hold_slot: SlotCheck, job: ReportJob, key: AttemptKey) -> str | None:
    """None when the started attempt holds its slot and runs; else why not. Handed back unburnt (pending
    again) unless a later attempt superseded it; a cancel meanwhile (shutdown) hands it back too."""
    try:
        verdict = await hold_slot(job, key)
    except asyncio.CancelledError:
        await asyncio.shield(service.release_attempt(key))
        raise
    if verdict == "ok":
        return None
    if verdict == "superseded":
        return "superseded before it ran: a later attempt holds its slot"
    await asyncio.shield(service.release_attempt(key, HANDBACKS.get(verdict, HANDBACKS["unknown"])))
    return f"handed back: slot {verdict}"


async def run_job(
    job_id: str, worker: str, traceparent: str | None = None, hold_slot: SlotCheck | None = None
) -> RunResult:
    """One delivery of a job's message, traced as an `attempt` span in the job's trace.

    `traceparent` comes with the message, so the span also covers picking the job up; a message without
    one (an older release's) opens the span from the job row's once the attempt has started, and a job
    submitted while tracing was off has neither: each attempt is then a trace of its own.
    A delivery that starts no attempt (not due, blocked, someone else's) is renamed `attempt.skipped`.
    `hold_slot` (the worker's) makes sure the started job holds its slot; if it cannot (a full cap, Redis
    away), the attempt is handed back unburnt and runs later; if a later attempt holds it, it never runs.
    """
    with contextlib.ExitStack() as stack:
        span = stack.enter_context(tracing.span("attempt", parent=traceparent)) if traceparent else None
        decision = await group_commit.start_attempt(job_id, worker)
        if not isinstance(decision, service.Started):
            tracing.rename(span, "attempt.skipped")
            tracing.annotate(span, {"job.id": job_id, "attempt.skipped": type(decision).__name__})
            if isinstance(decision, service.NotDue):
                return RunResult(defer_s=decision.delay_s, detail="not due yet")
            return RunResult(detail=decision.reason)
        job, key = decision.job, decision.key
        if hold_slot is not None and (why := await _not_held(hold_slot, job, key)) is not None:
            tracing.rename(span, "attempt.skipped")
            return RunResult(detail=why)
        if span is None:
            span = stack.enter_context(tracing.span("attempt", parent=job.traceparent))
        tracing.annotate(
            span,
            {
                "job.id": job.id,
                "job.report_type": job.report_type,
                "job.tenant": job.tenant,
                "job.replay": key.replay,
                "attempt.number": key.attempt,
                "attempt.worker": worker,
            },
        )
        return await _run_attempt(job, key, span)


async def _run_attempt(job: ReportJob, key: AttemptKey, span: Span | None) -> RunResult:
    settings = get_settings()
    ctx = ReportContext(
        job_id=job.id,
        tenant=job.tenant,
        attempt=key.attempt,
        replay=key.replay,
        attempts_total=job.attempts_total + 1,  # `job` is the row as read before this attempt started
        output_root=settings.output_dir,
        store=get_output_store(),
        schedule_id=job.schedule_id,
        scheduled_for=job.scheduled_for,
        requested_format=_requested_format(job.params),
    )
    rtype = registry.get(job.report_type) or await _declared_since(job.report_type)
    outcome: AttemptOutcome | None = None
    error: dict[str, Any] | None = None
    behind: list[asyncio.Task[Any]] = []  # a report that ignored its cancel (see CANCEL_GRACE_S)
    if rtype is None:
        outcome, error = (
            AttemptOutcome.FAILED,
            service.error_dict(
                "UnknownReportType",
                f"no report type {job.report_type!r} is registered on this worker",
                declarations.path() is not None,  # declared on the API first, the workers follow: retried
            ),
        )
    else:
        try:
            params = rtype.params_model.model_validate(job.params)
        except ValidationError as exc:
            outcome, error = classify(exc)
    if outcome is None and rtype is not None:
        work = run_steps(ctx, params, rtype, key) if rtype.steps else rtype.fn(ctx, params)  # type: ignore[misc]
        outcome, error = await _run_report(ctx.run_and_publish(work), job.timeout_s, key, ctx, behind)
    tracing.annotate(
        span,
        {"attempt.outcome": outcome.value if outcome else AttemptOutcome.SUPERSEDED.value},
        error=None if outcome in (AttemptOutcome.SUCCEEDED, AttemptOutcome.CANCELLED) else _span_error(error),
    )
    if outcome is None:
        await service.note_late_result(key, AttemptOutcome.SUPERSEDED)
        return RunResult(detail="stopped: attempt no longer ours")
    result = await _recorded(lambda: _record(key, outcome, error, ctx.output_info, span))
    if behind:
        # Settled, but its code still runs: the delivery (its message, its slot) stays held until it ends, so
        # the job's next attempt never runs beside it; arq's own limit bounds the wait.
        await asyncio.wait(behind)
    return result


async def _declared_since(name: str) -> ReportType | None:
    """A type this worker does not know may have been declared since its last look at REPORT_TYPES_FILE
    (the API took the job after its own reload): look again now rather than fail the job."""
    if declarations.path() is None:
        return None
    await asyncio.to_thread(declarations.load_now)
    return registry.get(name)


async def _recorded(record: Callable[[], Awaitable[RunResult]]) -> RunResult:
    """`record()` once; only if that meets a database outage is the retry loop built and run (nearly every
    outcome is recorded at the first try)."""
    try:
        return await record()
    except Exception as exc:
        if not is_db_outage(exc):
            raise
    async for attempt in record_retrying():
        with attempt:
            return await record()
    raise AssertionError("record_retrying raises once it gives up")


async def _record(
    key: AttemptKey,
    outcome: AttemptOutcome,
    error: dict[str, Any] | None,
    output: OutputInfo | None,
    span: Span | None,
) -> RunResult:
    """Write the attempt's outcome (safe to run again: every write is a compare-and-set on the attempt)."""
    await failpoints.hit("finish.before_record")
    if outcome == AttemptOutcome.SUCCEEDED:
        if not await group_commit.complete_attempt(key, output):
            await service.note_late_result(key, outcome)
        return RunResult(detail="done")
    if outcome == AttemptOutcome.CANCELLED:
        await service.finish_cancelled(key)
        return RunResult(detail="cancelled")
    assert error is not None
    result = await service.fail_attempt(key, outcome, error)
    if not result.applied:
        await service.note_late_result(key, outcome)
    tracing.annotate(span, {"job.status": result.status.value if result.status else None})
    if result.applied and result.status == JobStatus.RETRYING:
        return RunResult(defer_s=result.delay_s, detail="retrying")
    return RunResult(detail=result.status.value if result.status else "discarded")


def _requested_format(params: Any) -> str | None:
    """The job's `format` param, if its type's schema has one (what `ctx.rows_writer` writes by default)."""
    value = params.get("format") if isinstance(params, dict) else None
    return value if isinstance(value, str) else None


def _span_error(error: dict[str, Any] | None) -> str:
    if not error:
        return "attempt no longer ours"
    return f"{error.get('type')}: {error.get('message')}"[:200]


async def _run_report(
    coro: Any, timeout_s: float, key: AttemptKey, ctx: ReportContext, behind: list[asyncio.Task[Any]]
) -> tuple[AttemptOutcome | None, dict[str, Any] | None]:
    task: asyncio.Task[Any] = asyncio.ensure_future(coro)
    state: dict[str, str] = {}
    beat: asyncio.Task[None] | None = None
    try:
        # The heartbeat task starts only once the report has run one interval: most reports end before.
        first_s = min(timeout_s, get_settings().heartbeat_interval_s)
        done, _ = await asyncio.wait({task}, timeout=first_s)
        if not done and timeout_s > first_s:
            beat = asyncio.create_task(_heartbeat_loop(key, ctx, task, state))
            done, _ = await asyncio.wait({task}, timeout=timeout_s - first_s)
        if not done:
            if not await _cancelled(task, key):
                behind.append(task)
            return AttemptOutcome.TIMED_OUT, service.error_dict(
                "TimeoutError", f"attempt exceeded its {timeout_s:g} s time limit", True
            )
        if task.cancelled():
            if state.get("stopped") == "cancelled":
                return AttemptOutcome.CANCELLED, service.error_dict(
                    "Cancelled", "cancelled on request", False
                )
            return None, None
        exc = task.exception()
        if exc is None:
            return AttemptOutcome.SUCCEEDED, None
        return classify(exc)
    except asyncio.CancelledError:
        # Worker shutdown past its grace period: hand the attempt back unburnt; arq re-queues the message.
        await _cancelled(task, key)
        with contextlib.suppress(Exception):
            await asyncio.shield(service.release_attempt(key))
        raise
    finally:
        if beat is not None:
            beat.cancel()
            with contextlib.suppress(BaseException):
                await beat


async def _cancelled(task: asyncio.Task[Any], key: AttemptKey) -> bool:
    """Cancel the report and give it CANCEL_GRACE_S to end; one that ignores the cancel is left running
    (nothing can stop a coroutine that swallows it) and its attempt is settled without it. True if it
    ended."""
    task.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.wait({task}, timeout=CANCEL_GRACE_S)
    if not task.done():
        extra = {"job_id": key.job_id, "attempt": key.attempt}
        log.warning("report ignored its cancel; left behind", extra=extra)
    return task.done()
