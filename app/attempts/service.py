"""Attempts, as a worker and the stuck-job scan drive them: start, heartbeat, complete, fail, cancel,
hand back, declare lost. Every change is a compare-and-set on the attempt's key, so a second delivery never
starts a job twice and a late result from a superseded attempt changes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from app.attempts.repository import AttemptRepository
from app.core import metrics
from app.core.config import get_settings
from app.core.db import session_scope
from app.core.errors import NotFound
from app.core.ids import new_id
from app.core.states import STARTABLE, AttemptKey, AttemptOutcome, JobStatus, status_after_failure
from app.core.tenancy import EVERY_TENANT, TenantScope
from app.core.times import utcnow
from app.dead_letters.repository import DeadLetterRepository
from app.destinations import delivery, notices, slow_routes
from app.dispatch import queue
from app.jobs.effects import NO_EFFECTS, TerminalEffects, stage_terminal_effects
from app.jobs.repository import JobRepository
from app.jobs.waiting import eligible_since
from app.models import DeadLetter, JobAttempt, ReportJob
from app.reports.base import OutputInfo

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Started:
    """An attempt that began: `job` is the row as read just before the start (status, attempt and
    attempts_total are those before it; `key` holds the new attempt's)."""

    job: ReportJob
    key: AttemptKey


@dataclass(frozen=True)
class NotDue:
    delay_s: float


@dataclass(frozen=True)
class Skip:
    reason: str


@dataclass(frozen=True)
class Blocked:
    """An earlier job of the same ordering key must finish first; its finish wakes this one."""

    blocker_id: str

    @property
    def reason(self) -> str:
        return f"waiting for {self.blocker_id} (same ordering key)"


@dataclass(frozen=True)
class FailResult:
    applied: bool
    status: JobStatus | None = None
    delay_s: float = 0.0


def error_dict(exc_type: str, message: str, retryable: bool) -> dict[str, Any]:
    return {"type": exc_type, "message": message[:2000], "retryable": retryable}


def precheck(job: ReportJob | None, now: datetime) -> NotDue | Skip | None:
    """Why a delivery cannot start this job now (None: it may, ordering key aside)."""
    if job is None:
        return Skip("job not found")
    if job.status not in STARTABLE:
        return Skip(f"job is {job.status.value}")
    due_at = job.next_attempt_at if job.status == JobStatus.RETRYING else job.run_at
    if job.status != JobStatus.PENDING and due_at is not None and due_at > now:
        return NotDue((due_at - now).total_seconds())
    return None


class OrderingReader(Protocol):
    """Where a start reads a job's predecessors: a session's JobRepository, or a group commit's batch."""

    async def ordering_blocker(self, row: ReportJob) -> str | None: ...

    async def set_blocked_by(self, job_id: str, blocker: str | None) -> None: ...


async def blocker_of(jobs: OrderingReader, job: ReportJob) -> Blocked | None:
    """An unfinished predecessor on the job's ordering key, noted on the job (`blocked_by`)."""
    blocker = await jobs.ordering_blocker(job)
    if blocker is None:
        return None
    if job.blocked_by != blocker:
        await jobs.set_blocked_by(job.id, blocker)
    return Blocked(blocker)


def new_attempt(job: ReportJob, now: datetime, worker: str) -> tuple[AttemptKey, dict[str, Any]]:
    """The key of the attempt that starting `job` (as read before the start) begins, and its row's column
    values (a plain dict: building a model instance per attempt cost more than inserting it)."""
    key = AttemptKey(
        job.id,
        job.attempt + 1,
        job.replay_count,
        has_effects=bool(
            job.callback_url
            or job.ordering_key
            or job.deliver_to
            or slow_routes.covers(job.tenant, job.report_type, scheduled=job.schedule_id is not None)
        ),
        report_type=job.report_type,
        tenant=job.tenant,
        created_at=job.created_at,
        started_at=now,
    )
    row = {
        "job_id": job.id,
        "replay": key.replay,
        "attempt": key.attempt,
        "started_at": now,
        "finished_at": None,
        "outcome": AttemptOutcome.RUNNING.value,
        "error": None,
        "worker": worker,
        "cancel_requested_at": None,
    }
    return key, row


def mark_started(job: ReportJob, key: AttemptKey, now: datetime) -> Started:
    """After the commit: the start counted (the row is left as read: setting a model's attributes cost
    more than the rest of this)."""
    metrics.observe_start(job, eligible_since(job), now)
    return Started(job, key)


async def start_attempt(job_id: str, worker: str) -> Started | NotDue | Skip | Blocked:
    """CAS a startable, due job to running; a second delivery of the same job gets Skip.

    The worker starts jobs through `app.attempts.group_commit`, which shares one transaction between the
    starts that arrive together and comes back here for a start on its own.
    """
    await slow_routes.refresh_if_stale()
    now = utcnow()
    async with session_scope() as session:
        jobs, attempts = JobRepository(session), AttemptRepository(session)
        job = await jobs.get_job(job_id, EVERY_TENANT)
        refused = precheck(job, now)
        if refused is not None:
            return refused
        assert job is not None
        if job.ordering_key:
            blocked = await blocker_of(jobs, job)
            if blocked is not None:
                return blocked
            # Stamped after the predecessor was seen finished: its finished_at comes before this started_at.
            now = utcnow()
        if await attempts.start(job, now, worker) != 1:
            return Skip("another delivery started this job")
        key, row = new_attempt(job, now, worker)
        await attempts.add_attempt(row)
    # Only now, with the session closed: changing the row inside it would flush one more UPDATE.
    return mark_started(job, key, now)


async def heartbeat(key: AttemptKey, progress: float | None) -> tuple[bool, bool]:
    """Refresh the attempt's heartbeat; returns (still ours, cancel requested)."""
    values: dict[str, Any] = {"heartbeat_at": utcnow()}
    if progress is not None:
        values["progress"] = progress
    async with session_scope() as session:
        attempts = AttemptRepository(session)
        if await attempts.update_running(key, values) == 1:
            return True, bool(await attempts.cancel_requested(key))
    return False, False


async def terminal_effects(session: AsyncSession, key: AttemptKey) -> TerminalEffects:
    return await stage_terminal_effects(session, key.job_id) if key.has_effects else NO_EFFECTS


def done_values(now: datetime, output: OutputInfo | None) -> dict[str, Any]:
    """The job's columns once its running attempt succeeded."""
    values: dict[str, Any] = {
        "status": JobStatus.DONE.value,
        "finished_at": now,
        "updated_at": now,
        "progress": 1.0,
        "last_error": None,
        "heartbeat_at": None,
    }
    if output is not None:
        values.update(output.columns())
    return values


def after_done(key: AttemptKey, now: datetime) -> None:
    """Counted and logged once the success is committed (one structured line per terminal transition)."""
    metrics.count_attempt(key, AttemptOutcome.SUCCEEDED, key.started_at, now)
    metrics.count_terminal(key, JobStatus.DONE, key.created_at, now)
    log_terminal(key, JobStatus.DONE)


def log_terminal(key: AttemptKey, status: JobStatus) -> None:
    if log.isEnabledFor(logging.INFO):
        log.info(
            "job finished",
            extra={
                "job_id": key.job_id,
                "status": status.value,
                "attempt": key.attempt,
                "replay": key.replay,
            },
        )


async def complete_attempt(key: AttemptKey, output: OutputInfo | None) -> bool:
    """Running → done for this attempt only; False if the attempt was superseded meanwhile."""
    now = utcnow()
    async with session_scope() as session:
        attempts = AttemptRepository(session)
        if await attempts.update_running(key, done_values(now, output)) != 1:
            log.warning("late success discarded", extra={"job_id": key.job_id, "attempt": key.attempt})
            return False
        await attempts.finish_attempt(key, AttemptOutcome.SUCCEEDED, now, None)
        effects = await terminal_effects(session, key)
    after_done(key, now)
    await effects.publish()
    return True


async def fail_attempt(key: AttemptKey, outcome: AttemptOutcome, error: dict[str, Any]) -> FailResult:
    """Running → retrying (with backoff) or dead (with its dead letter, same transaction); a retryable
    failure of an attempt that was asked to cancel ends the job cancelled instead of trying again."""
    settings = get_settings()
    now = utcnow()
    async with session_scope() as session:
        attempts = AttemptRepository(session)
        job = await JobRepository(session).get_job(key.job_id, EVERY_TENANT)
        if job is None:
            return FailResult(applied=False)
        target = status_after_failure(key.attempt, job.max_attempts, bool(error.get("retryable")))
        if target == JobStatus.RETRYING and job.cancel_requested:
            target = JobStatus.CANCELLED  # the run failed before it saw the request: no further attempt
        values: dict[str, Any] = {
            "status": target.value,
            "last_error": error,
            "updated_at": now,
            "heartbeat_at": None,
        }
        delay_s = 0.0
        if target == JobStatus.RETRYING:
            delay_s = settings.attempt_backoff.delay_s(key.attempt)
            values["next_attempt_at"] = now + timedelta(seconds=delay_s)
        else:
            values["finished_at"] = now
        if await attempts.update_running(key, values) != 1:
            log.warning("late failure discarded", extra={"job_id": key.job_id, "attempt": key.attempt})
            return FailResult(applied=False)
        await attempts.finish_attempt(key, outcome, now, error)
        letter_id, effects, noticed = None, NO_EFFECTS, []
        if target == JobStatus.DEAD:
            letter_id = new_id()
            await DeadLetterRepository(session).add_letter(
                DeadLetter(
                    id=letter_id,
                    job_id=job.id,
                    tenant=job.tenant,
                    report_type=job.report_type,
                    params=job.params,
                    error=error,
                    attempts=key.attempt,
                    created_at=now,
                    expire_at=now + timedelta(seconds=settings.dead_letter_ttl_s),
                )
            )
        if target != JobStatus.RETRYING:
            effects = await terminal_effects(session, key)
        if letter_id is not None:
            noticed = await notices.dead(session, key.job_id)
            await DeadLetterRepository(session).count_opened(job.tenant)
    labels = _labelled(key, job)
    metrics.count_attempt(labels, outcome, key.started_at or job.started_at, now)
    if target == JobStatus.RETRYING:
        metrics.count_retry(labels)
    else:
        metrics.count_terminal(labels, target, job.created_at, now)
        log_terminal(key, target)
    if letter_id is not None:
        await queue.enqueue_dead_letter(letter_id)
        await delivery.publish(noticed)
    await effects.publish()
    return FailResult(applied=True, status=target, delay_s=delay_s)


async def finish_cancelled(key: AttemptKey) -> bool:
    """A running attempt stopped because a cancel was requested: running → cancelled."""
    now = utcnow()
    error = error_dict("Cancelled", "cancelled on request while running", retryable=False)
    values = {
        "status": JobStatus.CANCELLED.value,
        "finished_at": now,
        "updated_at": now,
        "heartbeat_at": None,
    }
    async with session_scope() as session:
        attempts = AttemptRepository(session)
        if await attempts.update_running(key, values) != 1:
            return False
        await attempts.finish_attempt(key, AttemptOutcome.CANCELLED, now, error)
        effects = await terminal_effects(session, key)
    metrics.count_attempt(key, AttemptOutcome.CANCELLED, key.started_at, now)
    metrics.count_terminal(key, JobStatus.CANCELLED, key.created_at, now)
    log_terminal(key, JobStatus.CANCELLED)
    await effects.publish()
    return True


SHUTDOWN_HANDBACK = ("WorkerShutdown", "the worker stopped before the attempt finished; handed back")


async def release_attempt(key: AttemptKey, why: tuple[str, str] = SHUTDOWN_HANDBACK) -> bool:
    """Hand an unfinished attempt back unburnt (worker shutdown, or `why`): running → pending, attempt - 1."""
    now = utcnow()
    error = error_dict(*why, True)
    values = {
        "status": JobStatus.PENDING.value,
        "attempt": key.attempt - 1,
        "heartbeat_at": None,
        "updated_at": now,
        "next_attempt_at": None,
    }
    async with session_scope() as session:
        attempts = AttemptRepository(session)
        if await attempts.update_running(key, values) != 1:
            return False
        await attempts.uncount_attempt(key.job_id)
        await attempts.finish_attempt(key, AttemptOutcome.SUPERSEDED, now, error)
        job = await JobRepository(session).get_job(key.job_id, EVERY_TENANT)
    metrics.count_attempt(key, AttemptOutcome.SUPERSEDED, key.started_at, now)
    if job is not None:
        # Pending again, so it has a message like any pending job: its own may be gone already (a delivery
        # cancelled mid-start went back to its lane, and another worker dropped it as someone else's while the
        # start still held the job); if it is still there, this is a no-op.
        await queue.enqueue_run(
            job.id, job.replay_count, traceparent=job.traceparent, lane=queue.lane_of(job)
        )
    return True


async def record_output(key: AttemptKey, output: OutputInfo) -> None:
    """Keep a step's output on the job at once: later attempts may skip the step that made it."""
    async with session_scope() as session:
        await AttemptRepository(session).update_running(key, output.columns())


def _labelled(key: AttemptKey, job: ReportJob) -> metrics.Labelled:
    """The key when it carries the job's labels (a worker's attempt), else the job row."""
    return key if key.report_type else job


async def note_late_result(key: AttemptKey, outcome: AttemptOutcome) -> None:
    async with session_scope() as session:
        await AttemptRepository(session).note_late_result(key, outcome.value, utcnow())


async def list_attempts(job_id: str, scope: TenantScope) -> list[JobAttempt]:
    async with session_scope() as session:
        if await JobRepository(session).get_job(job_id, scope) is None:
            raise NotFound(f"No job {job_id!r}.")
        return await AttemptRepository(session).list_attempts(job_id)
