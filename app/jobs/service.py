"""Use cases of jobs as the API and reportctl see them: submit, read, list, download, cancel, replay, and
resolving a dead job's letter by hand. Each its own transaction; enqueues only after the commit.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError

from app.callbacks.service import check_callback_url
from app.core import failpoints, metrics, redis_pool, tracing
from app.core.config import get_settings
from app.core.db import session_scope, snapshot_scope
from app.core.errors import (
    Conflict,
    IdempotencyConflict,
    NotFound,
    OutputNotReady,
    RateLimited,
    ValidationFailed,
)
from app.core.states import REPLAYABLE, TERMINAL, AttemptKey, JobStatus
from app.core.tenancy import EVERY_TENANT, TenantScope
from app.core.times import utcnow
from app.dead_letters.repository import DeadLetterRepository, LetterFilter
from app.destinations import service as destinations
from app.destinations.schemas import DeliverTo
from app.dispatch import queue
from app.dispatch.lanes import Wait
from app.fairshare.service import waiting_document
from app.jobs import group_submit
from app.jobs.building import JobSpec, row_with, submit_row
from app.jobs.effects import NO_EFFECTS, stage_terminal_effects, wake_next_in_order
from app.jobs.list_repository import JobFilter, JobListPage, JobListRepository
from app.jobs.repository import JobRepository
from app.jobs.step_repository import StepRepository
from app.jobs.validation import validate_submit
from app.models import DeadLetter, JobStep, ReportJob
from app.outputs import get_output_store
from app.outputs.base import StoredOutput
from app.reports.registry import ReportType, registry

Checked = tuple[ReportType, dict[str, Any], list[dict[str, Any]] | None]  # type, params, deliver_to


@dataclass(frozen=True)
class SubmitRequest:
    report_type: str
    params: dict[str, Any]
    run_at: datetime | None = None
    max_attempts: int | None = None
    ordering_key: str | None = None
    callback_url: str | None = None
    on_predecessor_dead: str = "wait"
    priority: int | None = None
    deliver_to: tuple[DeliverTo, ...] = ()

    def fingerprint(self) -> str:
        body = {
            "report_type": self.report_type,
            "params": self.params,
            "run_at": self.run_at.isoformat() if self.run_at else None,
            "max_attempts": self.max_attempts,
            "ordering_key": self.ordering_key,
            "callback_url": self.callback_url,
            "on_predecessor_dead": self.on_predecessor_dead,
            **({"priority": self.priority} if self.priority is not None else {}),
            **({"deliver_to": [d.model_dump() for d in self.deliver_to]} if self.deliver_to else {}),
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class SubmitResult:
    job: ReportJob
    created: bool
    # What keeps a new job waiting although it is next in line (a pause, a full cap); see app.fairshare.
    waiting_for: dict[str, Any] | None = None


def existing_answer(existing: ReportJob, fingerprint: str) -> SubmitResult:
    """An Idempotency-Key already holds `existing`: the same request gets it back, another one is a 409."""
    if existing.request_hash != fingerprint:
        raise IdempotencyConflict("This Idempotency-Key was already used with a different request body.")
    return SubmitResult(existing, created=False)


async def by_idempotency_keys(tenant: str, keys: Collection[str]) -> dict[str, ReportJob]:
    """The tenant's jobs holding any of `keys`, by key (one round trip)."""
    async with session_scope() as session:
        repo = JobRepository(session)
        if len(keys) == 1:
            (key,) = keys
            found = await repo.get_job_by_idempotency_key(tenant, key)
            return {key: found} if found is not None else {}
        return await repo.get_jobs_by_idempotency_keys(tenant, list(keys))


async def check_submit(
    tenant: str, req: SubmitRequest, now: datetime, callback_problems: dict[str, str | None] | None = None
) -> Checked:
    """Everything a submit must pass before anything is written (raises ValidationFailed): type, params,
    run_at, callback URL (verdicts cached across a batch), destinations (resolved to the tenant's, by id)."""
    rtype, params = validate_submit(req.report_type, req.params, req.run_at, now)
    if req.callback_url:
        if callback_problems is None or req.callback_url not in callback_problems:
            problem = await check_callback_url(tenant, req.callback_url)
            if callback_problems is not None:
                callback_problems[req.callback_url] = problem
        else:
            problem = callback_problems[req.callback_url]
        if problem:
            raise ValidationFailed(
                "The callback_url is not acceptable.",
                [{"loc": ["callback_url"], "msg": problem, "type": "callback_url"}],
            )
    return rtype, params, await destinations.resolve_deliver_to(tenant, req.deliver_to)


def new_job_row(
    tenant: str,
    req: SubmitRequest,
    checked: Checked,
    idempotency_key: str | None,
    fingerprint: str | None,
    now: datetime,
    job_id: str | None = None,
) -> ReportJob:
    """The new (read-only) row of a checked submit request."""
    rtype, params, deliver_to = checked
    return submit_row(
        JobSpec(
            tenant=tenant,
            report_type=rtype.name,
            params=params,
            max_attempts=req.max_attempts,
            ordering_key=req.ordering_key,
            callback_url=req.callback_url,
            run_at=req.run_at,
            on_predecessor_dead=req.on_predecessor_dead,
            idempotency_key=idempotency_key,
            request_hash=fingerprint if idempotency_key else None,
            priority=req.priority,
            deliver_to=deliver_to,
        ),
        now,
        job_id,
    )


def rate_limited(tenant: str, per_minute: int, retry_after_s: int) -> RateLimited:
    return RateLimited(f"Tenant {tenant!r} may submit {per_minute} jobs a minute.", retry_after_s)


def run_message(job: ReportJob) -> queue.RunMessage:
    """The main-queue message of a new job: deferred to run_at when it is scheduled."""
    scheduled = job.status == JobStatus.SCHEDULED
    defer_until = job.run_at if scheduled else None
    return queue.RunMessage(job.id, job.replay_count, defer_until, job.traceparent, queue.lane_of(job))


async def submit(tenant: str, req: SubmitRequest, idempotency_key: str | None = None) -> SubmitResult:
    """Validate, insert and enqueue a job; an idempotent repeat answers the original. The `submit` span's
    traceparent is stored on the new row: every later attempt, alert, callback and replay joins its trace."""
    attributes = {"job.report_type": req.report_type, "job.tenant": tenant}
    with tracing.span("submit", attributes=attributes) as span:
        result = await _submit(tenant, req, idempotency_key)
        tracing.annotate(span, {"job.id": result.job.id, "job.created": result.created})
        return result


async def _submit(tenant: str, req: SubmitRequest, idempotency_key: str | None) -> SubmitResult:
    settings = get_settings()
    now = utcnow()
    checked = await check_submit(tenant, req, now)
    fingerprint = req.fingerprint() if idempotency_key else None
    if idempotency_key and (existing := await by_idempotency_keys(tenant, [idempotency_key])):
        assert fingerprint is not None
        return existing_answer(existing[idempotency_key], fingerprint)
    # Only new jobs spend the tenant's budget: an idempotent repeat got its original job above.
    if per_minute := settings.submit_rate_limit_per_minute:
        retry_after_s = await redis_pool.take_rate_token(tenant, per_minute)
        if retry_after_s is not None:
            raise rate_limited(tenant, per_minute, retry_after_s)
    job = new_job_row(tenant, req, checked, idempotency_key, fingerprint, now)
    try:
        if job.ordering_key:
            job, wait = await _insert_ordered(job)
        else:  # shares a transaction and an enqueue with the submits arriving together
            wait = await group_submit.insert_and_enqueue(job, run_message(job))
    except IntegrityError:
        # Another request with this key won the race: answer its job (or 409 for a different body).
        if not idempotency_key or not (existing := await by_idempotency_keys(tenant, [idempotency_key])):
            raise
        assert fingerprint is not None
        return existing_answer(existing[idempotency_key], fingerprint)
    metrics.count_submitted(job)
    return SubmitResult(job, created=True, waiting_for=waiting_document(wait))


async def _insert_ordered(job: ReportJob) -> tuple[ReportJob, Wait | None]:
    """A job with an ordering key, alone: its answer names the predecessor it waits for."""
    async with session_scope() as session:
        jobs = JobRepository(session)
        assert job.tenant and job.ordering_key
        job = row_with(job, ordering_seq=await jobs.take_places(job.tenant, job.ordering_key, 1))
        if blocker := await jobs.ordering_blocker(job):
            job = row_with(job, blocked_by=blocker)
        await jobs.add_job(job)
    await failpoints.hit("submit.after_commit")
    _, wait = await queue.enqueue_explained(run_message(job))
    return job, wait


async def get_job(job_id: str, scope: TenantScope) -> ReportJob:
    async with session_scope() as session:
        job = await JobRepository(session).get_job(job_id, scope)
    if job is None:
        raise NotFound(f"No job {job_id!r}.")
    return job


async def list_jobs(flt: JobFilter, before_id: str | None, limit: int) -> JobListPage:
    """Up to `limit` jobs newest first below `before_id` (app.jobs.list_repository: a page may be cut short
    by the scan bound, with `resume_before` to go on from). Its reads share one snapshot."""
    async with snapshot_scope() as session:
        return await JobListRepository(session).page(flt, before_id, limit)


async def get_output(job_id: str, scope: TenantScope) -> tuple[ReportJob, StoredOutput]:
    """The done job's file as its store hands it over (a path, a stream or a presigned link); an object
    store that does not answer raises OutputStoreUnavailable (503)."""
    job = await get_job(job_id, scope)
    if job.status != JobStatus.DONE:
        raise OutputNotReady(f"Job {job_id} is {job.status.value}; its output exists once it is done.")
    # Keys are ours (`{job_id}/r…-a…/{name}`): a row naming anything else is not served.
    key = job.output_path or ""
    stored = await get_output_store().fetch(key) if key.startswith(f"{job.id}/") else None
    if stored is None:
        raise NotFound(f"Job {job_id} has no output file (it may have been purged).")
    return job, stored


async def list_steps(job_id: str, scope: TenantScope) -> list[JobStep]:
    async with session_scope() as session:
        if await JobRepository(session).get_job(job_id, scope) is None:
            raise NotFound(f"No job {job_id!r}.")
        return await StepRepository(session).list_steps(job_id)


async def cancel(job_id: str, scope: TenantScope) -> ReportJob:
    """Waiting jobs become cancelled at once; a running one is asked to stop: its worker sees the request at
    the next heartbeat, and a report that finishes first ends `done`. Either way the job (and a running job's
    attempt) keeps when the cancel was asked."""
    now = utcnow()
    async with session_scope() as session:
        jobs = JobRepository(session)
        job = await jobs.get_job(job_id, scope)
        if job is None:
            raise NotFound(f"No job {job_id!r}.")
        if job.status in TERMINAL:
            raise Conflict(f"Job {job_id} is already {job.status.value}.")
        running = job.status == JobStatus.RUNNING
        if running:
            key = AttemptKey(job.id, job.attempt, job.replay_count)
            changed = await jobs.request_cancel(key, now)
            if changed == 1:
                await jobs.note_cancel_request(key, now)
        else:
            changed = await jobs.cancel_waiting(job, now)
        if changed != 1:
            raise Conflict(f"Job {job_id} changed while cancelling; try again.")
        effects = NO_EFFECTS if running else await stage_terminal_effects(session, job_id)
        fresh = await jobs.get_job(job_id, EVERY_TENANT)
    if not running:
        metrics.count_terminal(job, JobStatus.CANCELLED, job.created_at, now)
    await effects.publish()
    assert fresh is not None
    return fresh


def _check_steps(job: ReportJob, steps: Sequence[str]) -> None:
    rtype = registry.get(job.report_type)
    known = [s.name for s in rtype.steps] if rtype else []
    unknown = [name for name in steps if name not in known]
    if unknown:
        raise ValidationFailed(
            "Unknown steps.",
            [{"loc": ["steps"], "type": "unknown_step", "msg": f"{unknown} not among {known}"}],
        )


async def replay(job_id: str, scope: TenantScope, steps: Sequence[str] | None = None) -> ReportJob:
    """dead/cancelled → pending (attempt reset, replay_count + 1): its dead letters are marked replayed, the
    named steps (default: every failed one) may run again, and the job is re-enqueued.

    The replayed job continues its original trace: the row keeps its traceparent, and a `replay` span in that
    trace links to the request that asked for it."""
    started_ns = time.time_ns()
    now = utcnow()
    async with session_scope() as session:
        jobs = JobRepository(session)
        job = await jobs.get_job(job_id, scope)
        if job is None:
            raise NotFound(f"No job {job_id!r}.")
        if job.status not in REPLAYABLE:
            raise Conflict(
                f"Job {job_id} is {job.status.value}; only dead or cancelled jobs can be replayed."
            )
        if steps is not None:
            _check_steps(job, steps)
        if await jobs.replay(job, now) != 1:
            raise Conflict(f"Job {job_id} changed while replaying; try again.")
        await DeadLetterRepository(session).mark_replayed(job_id, job.tenant, now)
        await StepRepository(session).reset_for_replay(job_id, steps)
        replayed = await jobs.get_job(job_id, EVERY_TENANT)
    assert replayed is not None
    metrics.count_replay(replayed)
    with tracing.span(
        "replay",
        parent=replayed.traceparent,
        links=[tracing.current_traceparent()] if replayed.traceparent else (),
        attributes={"job.id": replayed.id, "job.replay": replayed.replay_count},
        start_time_ns=started_ns,
    ):
        await queue.enqueue_run(
            replayed.id, replayed.replay_count, traceparent=replayed.traceparent, lane=queue.lane_of(replayed)
        )
    return replayed


async def replay_dead_letters(
    job_ids: Sequence[str] = (), report_type: str | None = None, since: datetime | None = None
) -> int:
    """Bulk replay (admin): the jobs of unreplayed dead letters, by job ids or by report type and/or time;
    counts the jobs replayed."""
    flt = LetterFilter(
        scope=EVERY_TENANT,
        include_archived=True,
        report_type=report_type,
        created_after=since,
        job_ids=job_ids,
        unreplayed_only=True,
    )
    replayed = 0
    before_id: str | None = None
    seen: set[str] = set()
    while True:
        async with session_scope() as session:
            letters = await DeadLetterRepository(session).list_letters(flt, before_id, 500)
        if not letters:
            return replayed
        for letter in letters:
            if letter.job_id in seen:
                continue
            seen.add(letter.job_id)
            try:
                await replay(letter.job_id, EVERY_TENANT)
                replayed += 1
            except (Conflict, NotFound):
                continue
        before_id = letters[-1].id


async def resolve_dead_letter(letter_id: str, scope: TenantScope, who: str, reason: str) -> DeadLetter:
    """An operator fixed a dead job's effect by hand: its letter is archived with who and why (other open
    letters of the job, from earlier deaths, are archived too), the job stays `dead` but no longer blocks its
    ordering key, and the next pending job of that key is woken. Replaying it later is still allowed.

    Job first, then letters: the lock order of `replay`, so the two cannot deadlock; whichever commits first
    wins and the other answers 409."""
    now = utcnow()
    async with session_scope() as session:
        letters, jobs = DeadLetterRepository(session), JobRepository(session)
        letter = await letters.get_letter(letter_id, scope)
        if letter is None:
            raise NotFound(f"No dead letter {letter_id!r}.")
        if letter.resolved_at or letter.replayed_at or letter.archived_at:
            state = "resolved" if letter.resolved_at else "replayed" if letter.replayed_at else "archived"
            raise Conflict(f"Dead letter {letter_id} is already {state}.")
        job = await jobs.get_job(letter.job_id, EVERY_TENANT)
        if job is None or job.status != JobStatus.DEAD:
            raise Conflict(f"Job {letter.job_id} is no longer dead; its letter cannot be resolved.")
        if await jobs.mark_resolved(job, now) != 1 or await letters.resolve(letter, now, who, reason) != 1:
            raise Conflict(f"Dead letter {letter_id} changed while resolving; try again.")
        await letters.archive_open_of_job(job.id, job.tenant, now)
        resolved = await letters.get_letter(letter_id, EVERY_TENANT)
    assert resolved is not None
    if job.ordering_key:
        # Named after the letter: a wake-up message left from the job's death must not swallow this one.
        await wake_next_in_order(job.tenant, job.ordering_key, letter_id)
    return resolved
