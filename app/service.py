"""Use cases: submit, read, start/heartbeat/finish/fail an attempt, API keys.

Each opens its own transaction; enqueues and dead-letter publishes happen only after the commit.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from ulid import ULID

from app import callbacks, queue
from app.config import get_settings
from app.db import session_scope
from app.errors import (
    Conflict,
    IdempotencyConflict,
    NotFound,
    OutputNotReady,
    RateLimited,
    ValidationFailed,
)
from app.models import ApiKey, DeadLetter, JobAttempt, JobStep, ReportJob, utcnow
from app.reports.base import OutputInfo
from app.reports.registry import ReportType, Step, registry
from app.repository import AttemptKey, JobFilter, Repository
from app.states import (
    REPLAYABLE,
    STARTABLE,
    TERMINAL,
    AttemptOutcome,
    JobStatus,
    StepStatus,
    retry_delay_s,
    status_after_failure,
)
from app.storage import resolve_output

log = logging.getLogger(__name__)

MAX_SCHEDULE_AHEAD_S = 30 * 86400
RUN_AT_PAST_TOLERANCE_S = 1.0
KEY_PREFIX = "ro_"
TENANT_RE = re.compile(r"[a-z0-9][a-z0-9._:-]{0,63}")


def new_id() -> str:
    return str(ULID())


# ---- submit and read ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubmitRequest:
    report_type: str
    params: dict[str, Any]
    run_at: datetime | None = None
    max_attempts: int | None = None
    ordering_key: str | None = None
    callback_url: str | None = None
    on_predecessor_dead: str = "wait"

    def fingerprint(self) -> str:
        body = {
            "report_type": self.report_type,
            "params": self.params,
            "run_at": self.run_at.isoformat() if self.run_at else None,
            "max_attempts": self.max_attempts,
            "ordering_key": self.ordering_key,
            "callback_url": self.callback_url,
            "on_predecessor_dead": self.on_predecessor_dead,
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class SubmitResult:
    job: ReportJob
    created: bool


def params_shape_errors(params: Any, max_depth: int, max_string: int, max_items: int) -> list[dict[str, Any]]:
    """Bound what any params object may be, before a report type's own schema looks at it."""
    errors: list[dict[str, Any]] = []
    items = 0

    def walk(value: Any, loc: list[str | int], depth: int) -> None:
        nonlocal items
        if len(errors) >= 20:
            return
        items += 1
        if items == max_items + 1:
            errors.append(
                {"loc": ["body", "params"], "msg": f"more than {max_items} values", "type": "too_many"}
            )
        if depth > max_depth:
            errors.append(
                {
                    "loc": ["body", "params", *loc],
                    "msg": f"nested deeper than {max_depth}",
                    "type": "too_deep",
                }
            )
            return
        if isinstance(value, str) and len(value) > max_string:
            errors.append(
                {
                    "loc": ["body", "params", *loc],
                    "msg": f"string longer than {max_string}",
                    "type": "string_too_long",
                }
            )
        elif isinstance(value, dict):
            for key, child in value.items():
                if len(key) > 200:
                    errors.append(
                        {
                            "loc": ["body", "params", *loc],
                            "msg": "key longer than 200",
                            "type": "key_too_long",
                        }
                    )
                walk(child, [*loc, key[:200]], depth + 1)
        elif isinstance(value, list):
            for index, child in enumerate(value):
                walk(child, [*loc, index], depth + 1)

    walk(params, [], 0)
    return errors


def validate_submit(req: SubmitRequest, now: datetime) -> tuple[ReportType, dict[str, Any]]:
    """Check the report type, its params and run_at; raise ValidationFailed listing every bad field."""
    settings = get_settings()
    errors = params_shape_errors(
        req.params, settings.max_params_depth, settings.max_params_string_chars, settings.max_params_items
    )
    if errors:
        raise ValidationFailed("The job's params are too large or too deep.", errors)
    rtype = registry.get(req.report_type)
    params: dict[str, Any] = req.params
    if rtype is None:
        known = ", ".join(t.name for t in registry.all()) or "none"
        errors.append(
            {
                "loc": ["body", "report_type"],
                "msg": f"unknown report type (known: {known})",
                "type": "unknown_report_type",
            }
        )
    else:
        try:
            params = rtype.params_model.model_validate(req.params).model_dump(mode="json")
        except ValidationError as exc:
            for err in exc.errors():
                errors.append(
                    {"loc": ["body", "params", *err["loc"]], "msg": err["msg"], "type": err["type"]}
                )
    if req.run_at is not None:
        if req.run_at < now - timedelta(seconds=RUN_AT_PAST_TOLERANCE_S):
            errors.append({"loc": ["body", "run_at"], "msg": "run_at is in the past", "type": "run_at_past"})
        elif req.run_at > now + timedelta(seconds=MAX_SCHEDULE_AHEAD_S):
            errors.append(
                {
                    "loc": ["body", "run_at"],
                    "msg": "run_at is more than 30 days ahead",
                    "type": "run_at_too_far",
                }
            )
    if errors:
        raise ValidationFailed("The job request is invalid.", errors)
    assert rtype is not None
    return rtype, params


async def _check_callback(tenant: str, url: str) -> None:
    settings = get_settings()
    problem = None
    try:
        await callbacks.check_url(url, settings)
    except callbacks.CallbackRefused as exc:
        problem = str(exc)
    if problem is None and callbacks.secret_for(tenant, settings) is None:
        problem = "callbacks need CALLBACK_SECRET (or a tenant secret) to be configured"
    if problem:
        raise ValidationFailed(
            "The callback_url is not acceptable.",
            [{"loc": ["body", "callback_url"], "msg": problem, "type": "callback_url"}],
        )


@dataclass
class TerminalEffects:
    """What must happen after a terminal transition commits: its callback, and its ordering successor."""

    delivery_id: str | None = None
    ordering: tuple[str, str, str] | None = None  # tenant, ordering key, the job that finished

    async def publish(self) -> None:
        if self.delivery_id is not None:
            await queue.enqueue_callback(self.delivery_id)
        if self.ordering is not None:
            await wake_next_in_order(*self.ordering)


async def _after_terminal(repo: Repository, job_id: str, has_effects: bool = True) -> TerminalEffects:
    """Stage the effects of a terminal transition inside its own transaction (the callback outbox row)."""
    effects = TerminalEffects()
    if not has_effects:
        return effects
    job = await repo.get_job(job_id)
    if job is None:
        return effects
    if job.ordering_key:
        effects.ordering = (job.tenant, job.ordering_key, job.id)
    delivery = callbacks.new_delivery(job, new_id())
    if delivery is not None:
        await repo.add_delivery(delivery)
        effects.delivery_id = delivery.id
    return effects


async def wake_next_in_order(tenant: str, ordering_key: str, woken_by: str) -> None:
    """Enqueue the earliest pending job of an ordering key (it re-checks its predecessors itself).

    The message id names the finished predecessor: a message of the successor's own may sit under a killed
    worker's arq lease, and must not swallow this wake-up by deduplication."""
    async with session_scope() as session:
        job = await Repository(session).next_in_order(tenant, ordering_key)
    if job is not None:
        await queue.enqueue_run(job.id, job.replay_count, suffix=f"after-{woken_by}")


def _check_same_request(existing: ReportJob, fingerprint: str) -> SubmitResult:
    if existing.request_hash != fingerprint:
        raise IdempotencyConflict("This Idempotency-Key was already used with a different request body.")
    return SubmitResult(existing, created=False)


async def submit(tenant: str, req: SubmitRequest, idempotency_key: str | None = None) -> SubmitResult:
    settings = get_settings()
    now = utcnow()
    rtype, params = validate_submit(req, now)
    if req.callback_url:
        await _check_callback(tenant, req.callback_url)
    fingerprint = req.fingerprint()
    if idempotency_key:
        async with session_scope() as session:
            existing = await Repository(session).get_job_by_idempotency_key(tenant, idempotency_key)
        if existing is not None:
            return _check_same_request(existing, fingerprint)
    # Only new jobs spend the tenant's budget: an idempotent repeat got its original job above.
    if settings.submit_rate_limit_per_minute:
        retry_after_s = await queue.take_rate_token(tenant, settings.submit_rate_limit_per_minute)
        if retry_after_s is not None:
            raise RateLimited(
                f"Tenant {tenant!r} may submit {settings.submit_rate_limit_per_minute} jobs a minute.",
                retry_after_s,
            )
    scheduled = req.run_at is not None and req.run_at > now
    job = ReportJob(
        id=new_id(),
        tenant=tenant,
        report_type=rtype.name,
        params=params,
        status=JobStatus.SCHEDULED if scheduled else JobStatus.PENDING,
        max_attempts=req.max_attempts or rtype.max_attempts or settings.default_max_attempts,
        timeout_s=rtype.timeout_s or settings.job_timeout_s,
        run_at=req.run_at,
        ordering_key=req.ordering_key,
        on_predecessor_dead=req.on_predecessor_dead,
        callback_url=req.callback_url,
        idempotency_key=idempotency_key,
        request_hash=fingerprint if idempotency_key else None,
        created_at=now,
        updated_at=now,
    )
    try:
        async with session_scope() as session:
            await Repository(session).add_job(job)
    except IntegrityError:
        if not idempotency_key:
            raise
        async with session_scope() as session:
            existing = await Repository(session).get_job_by_idempotency_key(tenant, idempotency_key)
        if existing is None:
            raise
        return _check_same_request(existing, fingerprint)
    await queue.enqueue_run(job.id, job.replay_count, defer_until=job.run_at if scheduled else None)
    return SubmitResult(job, created=True)


async def get_job(job_id: str, tenant: str | None) -> ReportJob:
    async with session_scope() as session:
        job = await Repository(session).get_job(job_id, tenant)
    if job is None:
        raise NotFound(f"No job {job_id!r}.")
    return job


async def list_jobs(flt: JobFilter, before_id: str | None, limit: int) -> list[ReportJob]:
    async with session_scope() as session:
        return await Repository(session).list_jobs(flt, before_id, limit)


async def list_attempts(job_id: str, tenant: str | None) -> list[JobAttempt]:
    async with session_scope() as session:
        repo = Repository(session)
        if await repo.get_job(job_id, tenant) is None:
            raise NotFound(f"No job {job_id!r}.")
        return await repo.list_attempts(job_id)


async def get_output(job_id: str, tenant: str | None) -> tuple[ReportJob, Path]:
    job = await get_job(job_id, tenant)
    if job.status != JobStatus.DONE:
        raise OutputNotReady(f"Job {job_id} is {job.status.value}; its output exists once it is done.")
    path = resolve_output(get_settings().output_dir, job.output_path or "") if job.output_path else None
    if path is None:
        raise NotFound(f"Job {job_id} has no output file (it may have been purged).")
    return job, path


# ---- attempts (called by the worker) ------------------------------------------------------------


@dataclass(frozen=True)
class Started:
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


async def start_attempt(job_id: str, worker: str) -> Started | NotDue | Skip | Blocked:
    """CAS a startable, due job to running; a second delivery of the same job gets Skip."""
    now = utcnow()
    async with session_scope() as session:
        repo = Repository(session)
        job = await repo.get_job(job_id)
        if job is None:
            return Skip("job not found")
        if job.status not in STARTABLE:
            return Skip(f"job is {job.status.value}")
        due_at = job.next_attempt_at if job.status == JobStatus.RETRYING else job.run_at
        if job.status != JobStatus.PENDING and due_at is not None and due_at > now:
            return NotDue((due_at - now).total_seconds())
        if job.ordering_key:
            blocker = await repo.ordering_blocker(job)
            if blocker is not None:
                if job.blocked_by != blocker:
                    await repo.set_blocked_by(job.id, blocker)
                return Blocked(blocker)
        if await repo.cas_start_attempt(job, now, worker) != 1:
            return Skip("another delivery started this job")
        key = AttemptKey(
            job.id, job.attempt + 1, job.replay_count, has_effects=bool(job.callback_url or job.ordering_key)
        )
        await repo.add_attempt(
            JobAttempt(
                job_id=job.id,
                replay=key.replay,
                attempt=key.attempt,
                started_at=now,
                outcome=AttemptOutcome.RUNNING,
                worker=worker,
            )
        )
        job.status = JobStatus.RUNNING
        job.attempt = key.attempt
        job.attempts_total += 1
        job.started_at = now
    return Started(job, key)


async def heartbeat(key: AttemptKey, progress: float | None) -> tuple[bool, bool]:
    """Refresh the attempt's heartbeat; returns (still ours, cancel requested)."""
    now = utcnow()
    values: dict[str, Any] = {"heartbeat_at": now}
    if progress is not None:
        values["progress"] = progress
    async with session_scope() as session:
        repo = Repository(session)
        if await repo.cas_running(key, values) == 1:
            flags = await repo.get_running_flags(key)
            return True, bool(flags and flags[1])
    return False, False


async def complete_attempt(key: AttemptKey, output: OutputInfo | None) -> bool:
    """Running → done for this attempt only; False if the attempt was superseded meanwhile."""
    now = utcnow()
    values: dict[str, Any] = {
        "status": JobStatus.DONE.value,
        "finished_at": now,
        "updated_at": now,
        "progress": 1.0,
        "last_error": None,
        "heartbeat_at": None,
    }
    if output is not None:
        values.update(
            output_path=output.path,
            output_filename=output.filename,
            output_content_type=output.content_type,
            output_size=output.size,
        )
    async with session_scope() as session:
        repo = Repository(session)
        if await repo.cas_running(key, values) != 1:
            log.warning("late success discarded", extra={"job_id": key.job_id, "attempt": key.attempt})
            return False
        await repo.finish_attempt_row(key, AttemptOutcome.SUCCEEDED, now, None)
        effects = await _after_terminal(repo, key.job_id, key.has_effects)
    await effects.publish()
    return True


@dataclass(frozen=True)
class FailResult:
    applied: bool
    status: JobStatus | None = None
    delay_s: float = 0.0


def error_dict(exc_type: str, message: str, retryable: bool) -> dict[str, Any]:
    return {"type": exc_type, "message": message[:2000], "retryable": retryable}


async def fail_attempt(key: AttemptKey, outcome: AttemptOutcome, error: dict[str, Any]) -> FailResult:
    """Running → retrying (with backoff) or dead (with its dead letter, same transaction)."""
    settings = get_settings()
    now = utcnow()
    async with session_scope() as session:
        repo = Repository(session)
        job = await repo.get_job(key.job_id)
        if job is None:
            return FailResult(applied=False)
        target = status_after_failure(key.attempt, job.max_attempts, bool(error.get("retryable")))
        values: dict[str, Any] = {
            "status": target.value,
            "last_error": error,
            "updated_at": now,
            "heartbeat_at": None,
        }
        delay_s = 0.0
        if target == JobStatus.RETRYING:
            delay_s = retry_delay_s(settings.retry_delays_s, key.attempt)
            values["next_attempt_at"] = now + timedelta(seconds=delay_s)
        else:
            values["finished_at"] = now
        if await repo.cas_running(key, values) != 1:
            log.warning("late failure discarded", extra={"job_id": key.job_id, "attempt": key.attempt})
            return FailResult(applied=False)
        await repo.finish_attempt_row(key, outcome, now, error)
        letter_id, effects = None, TerminalEffects()
        if target == JobStatus.DEAD:
            letter_id = new_id()
            await repo.add_dead_letter(
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
            effects = await _after_terminal(repo, key.job_id, key.has_effects)
    if letter_id is not None:
        await queue.enqueue_dead_letter(letter_id)
    await effects.publish()
    return FailResult(applied=True, status=target, delay_s=delay_s)


async def finish_cancelled(key: AttemptKey) -> bool:
    """A running attempt stopped because a cancel was requested: running → cancelled."""
    now = utcnow()
    error = error_dict("Cancelled", "cancelled on request while running", retryable=False)
    async with session_scope() as session:
        repo = Repository(session)
        values = {
            "status": JobStatus.CANCELLED.value,
            "finished_at": now,
            "updated_at": now,
            "heartbeat_at": None,
        }
        if await repo.cas_running(key, values) != 1:
            return False
        await repo.finish_attempt_row(key, AttemptOutcome.CANCELLED, now, error)
        effects = await _after_terminal(repo, key.job_id, key.has_effects)
    await effects.publish()
    return True


async def release_attempt(key: AttemptKey) -> bool:
    """Hand an unfinished attempt back (worker shutdown) unburnt: running → pending, attempt - 1."""
    now = utcnow()
    error = error_dict("WorkerShutdown", "the worker stopped before the attempt finished; handed back", True)
    async with session_scope() as session:
        repo = Repository(session)
        values = {
            "status": JobStatus.PENDING.value,
            "attempt": key.attempt - 1,
            "heartbeat_at": None,
            "updated_at": now,
            "next_attempt_at": None,
        }
        if await repo.cas_running(key, values) != 1:
            return False
        await repo.decrement_attempts_total(key.job_id)
        await repo.finish_attempt_row(key, AttemptOutcome.SUPERSEDED, now, error)
    return True


async def cancel(job_id: str, tenant: str | None) -> ReportJob:
    """Waiting jobs become cancelled at once; a running one is asked to stop (its heartbeat sees the flag)."""
    now = utcnow()
    async with session_scope() as session:
        repo = Repository(session)
        job = await repo.get_job(job_id, tenant)
        if job is None:
            raise NotFound(f"No job {job_id!r}.")
        if job.status in TERMINAL:
            raise Conflict(f"Job {job_id} is already {job.status.value}.")
        if job.status == JobStatus.RUNNING:
            key = AttemptKey(job.id, job.attempt, job.replay_count)
            changed = await repo.cas_running(key, {"cancel_requested": True, "updated_at": now})
        else:
            changed = await repo.cas_cancel_waiting(job, now)
        if changed != 1:
            raise Conflict(f"Job {job_id} changed while cancelling; try again.")
        effects = (
            await _after_terminal(repo, job_id) if job.status != JobStatus.RUNNING else TerminalEffects()
        )
        fresh = await repo.get_job(job_id)
    await effects.publish()
    assert fresh is not None
    return fresh


async def declare_lost(stuck_after_s: float, limit: int = 500) -> int:
    """Running attempts silent for `stuck_after_s` → outcome lost (LostWorker) → retry or dead as usual."""
    now = utcnow()
    async with session_scope() as session:
        stuck = await Repository(session).stuck_jobs(now - timedelta(seconds=stuck_after_s), limit)
    declared = 0
    for job in stuck:
        key = AttemptKey(job.id, job.attempt, job.replay_count)
        if job.cancel_requested:
            declared += await finish_cancelled(key)
            continue
        message = f"no heartbeat for {stuck_after_s:g} s from worker {job.worker or '?'}"
        result = await fail_attempt(key, AttemptOutcome.LOST, error_dict("LostWorker", message, True))
        if not result.applied:
            continue
        declared += 1
        if result.status == JobStatus.RETRYING:
            # The killed worker's arq message may linger in Redis until its lease expires: add a fresh one.
            await queue.enqueue_run(
                job.id,
                job.replay_count,
                defer_until=now + timedelta(seconds=result.delay_s),
                suffix=f"lost{key.attempt}",
            )
    return declared


async def note_late_result(key: AttemptKey, outcome: AttemptOutcome) -> None:
    async with session_scope() as session:
        await Repository(session).note_late_result(key, outcome.value, utcnow())


# ---- steps ------------------------------------------------------------------------------------------


async def load_steps(job_id: str, steps: Sequence[Step]) -> list[JobStep]:
    """The job's step rows, created on its first attempt."""
    async with session_scope() as session:
        repo = Repository(session)
        rows = await repo.list_steps(job_id)
        known = {row.name for row in rows}
        missing = [
            JobStep(job_id=job_id, position=i, name=step.name, mode=step.mode)
            for i, step in enumerate(steps)
            if step.name not in known
        ]
        if missing:
            await repo.add_steps(missing)
            rows = await repo.list_steps(job_id)
    return rows


async def step_started(job_id: str, name: str) -> int:
    """Mark a step running (its try count goes up first, so a crash mid-step still counts the try)."""
    async with session_scope() as session:
        repo = Repository(session)
        [row] = [r for r in await repo.list_steps(job_id) if r.name == name]
        await repo.update_step(
            job_id,
            name,
            {
                "status": StepStatus.RUNNING.value,
                "attempts": row.attempts + 1,
                "rerun_allowed": False,
                "started_at": utcnow(),
                "finished_at": None,
            },
        )
    return row.attempts + 1


async def step_finished(job_id: str, name: str, status: StepStatus, error: dict[str, Any] | None) -> None:
    async with session_scope() as session:
        await Repository(session).update_step(
            job_id, name, {"status": status.value, "last_error": error, "finished_at": utcnow()}
        )


async def record_output(key: AttemptKey, output: OutputInfo) -> None:
    """Keep a step's output on the job at once: later attempts may skip the step that made it."""
    async with session_scope() as session:
        await Repository(session).cas_running(
            key,
            {
                "output_path": output.path,
                "output_filename": output.filename,
                "output_content_type": output.content_type,
                "output_size": output.size,
            },
        )


async def list_steps(job_id: str, tenant: str | None) -> list[JobStep]:
    async with session_scope() as session:
        repo = Repository(session)
        if await repo.get_job(job_id, tenant) is None:
            raise NotFound(f"No job {job_id!r}.")
        return await repo.list_steps(job_id)


async def replay(job_id: str, tenant: str | None, steps: Sequence[str] | None = None) -> ReportJob:
    """dead/cancelled → pending (attempt reset, replay_count + 1): its dead letters are marked replayed, the
    named steps (default: every failed one) may run again, and the job is re-enqueued."""
    now = utcnow()
    async with session_scope() as session:
        repo = Repository(session)
        job = await repo.get_job(job_id, tenant)
        if job is None:
            raise NotFound(f"No job {job_id!r}.")
        if job.status not in REPLAYABLE:
            raise Conflict(
                f"Job {job_id} is {job.status.value}; only dead or cancelled jobs can be replayed."
            )
        if steps is not None:
            rtype = registry.get(job.report_type)
            known = [s.name for s in rtype.steps] if rtype else []
            unknown = [name for name in steps if name not in known]
            if unknown:
                raise ValidationFailed(
                    "Unknown steps.",
                    [
                        {
                            "loc": ["body", "steps"],
                            "type": "unknown_step",
                            "msg": f"{unknown} not among {known}",
                        }
                    ],
                )
        if await repo.cas_replay(job, now) != 1:
            raise Conflict(f"Job {job_id} changed while replaying; try again.")
        await repo.mark_letters_replayed(job_id, now)
        await repo.reset_steps_for_replay(job_id, steps)
        replayed = await repo.get_job(job_id)
    assert replayed is not None
    await queue.enqueue_run(replayed.id, replayed.replay_count)
    return replayed


# ---- api keys ---------------------------------------------------------------------------------------


def hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    key_id: str
    tenant: str
    scopes: frozenset[str]

    @property
    def is_admin(self) -> bool:
        return "admin" in self.scopes

    def has(self, scope: str) -> bool:
        return self.is_admin or scope in self.scopes


VALID_SCOPES = frozenset({"jobs:read", "jobs:write", "admin"})


async def create_api_key(tenant: str, scopes: Sequence[str], name: str | None = None) -> tuple[ApiKey, str]:
    """Create a key and return it with the raw secret, which is shown once and stored only hashed."""
    bad = sorted(set(scopes) - VALID_SCOPES)
    if bad or not scopes:
        raise ValidationFailed(
            "Unknown scopes.", [{"loc": ["scopes"], "msg": f"unknown or empty: {bad}", "type": "scope"}]
        )
    if not TENANT_RE.fullmatch(tenant):
        # MySQL compares case-, accent- and trailing-space-insensitively: only slugs keep tenants apart.
        raise ValidationFailed(
            "Bad tenant.",
            [{"loc": ["tenant"], "type": "tenant", "msg": "1-64 of a-z 0-9 . _ : - (lowercase ASCII slug)"}],
        )
    raw = KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey(
        id=new_id(),
        prefix=raw[:12],
        key_hash=hash_key(raw),
        tenant=tenant,
        scopes=",".join(sorted(set(scopes))),
        name=name,
    )
    async with session_scope() as session:
        await Repository(session).add_api_key(key)
    return key, raw


async def authenticate(raw_key: str) -> Principal | None:
    digest = hash_key(raw_key)
    async with session_scope() as session:
        key = await Repository(session).get_api_key_by_hash(digest)
    if key is None or key.revoked_at is not None or not secrets.compare_digest(key.key_hash, digest):
        return None
    return Principal(key.id, key.tenant, frozenset(s for s in key.scopes.split(",") if s))


async def list_api_keys(tenant: str | None) -> list[ApiKey]:
    async with session_scope() as session:
        return await Repository(session).list_api_keys(tenant)


async def revoke_api_key(key_id_or_prefix: str) -> bool:
    async with session_scope() as session:
        return await Repository(session).revoke_api_key(key_id_or_prefix, utcnow()) > 0
