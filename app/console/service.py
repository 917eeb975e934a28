"""What the console's pages show, gathered from the domains' services and the console's own reads; every
read is limited to the viewer's tenants. Actions go through the same services as the API, item by item for
bulk actions (same rules, same refusals).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from app.attempts.service import list_attempts
from app.auth.service import Principal, authenticate, principal_by_id
from app.console.repository import AlertRow, ConsoleRepository, RunningJob, SinkHealth
from app.core.db import is_lock_conflict, session_scope
from app.core.errors import NotFound, OrchestratorError
from app.core.ids import ULID_RE
from app.core.tenancy import EVERY_TENANT, TenantScope
from app.core.times import utcnow
from app.dead_letters.repository import DeadLetterRepository, LetterFilter
from app.dead_letters.service import list_letters
from app.destinations.repository import DeliveryRepository, FailingDestination
from app.fleet.service import ListedProcess, list_processes
from app.jobs import service as jobs
from app.jobs.list_repository import JobFilter
from app.models import JobAttempt, JobStep, ReportJob
from app.observability.service import snapshot

log = logging.getLogger(__name__)

THROUGHPUT_MINUTES = 60
# A minute is rolled up this long after it ended: longer than a finish's commit can lag its finished_at stamp
# (a lock wait ends at innodb_lock_wait_timeout, 50 s by default); a later commit is not in the chart.
ROLL_UP_AFTER_S = 60.0
RUNNING_SHOWN = 50
BULK_PAGE = 500


@dataclass(frozen=True)
class Overview:
    taken_at: datetime
    state_ok: bool
    by_status: dict[str, int]
    by_type: dict[str, dict[str, int]]  # report_type → live status → count
    running: list[RunningJob]
    throughput: list[tuple[str, int, int]]  # (minute "HH:MM", done, dead), oldest first
    oldest_eligible_age_s: float
    open_letters: int
    workers_live: dict[str, int]
    scheduler_tick_age_s: float
    sinks: list[SinkHealth] = field(default_factory=list)


async def sign_in(raw_key: str) -> Principal | None:
    return await authenticate(raw_key.strip()) if raw_key.strip() else None


async def principal_of(key_id: str) -> Principal | None:
    return await principal_by_id(key_id)


async def overview(scope: TenantScope) -> Overview:
    now = utcnow()
    snap = await snapshot()
    live = [row for row in snap.live_jobs if scope.tenant is None or row.tenant == scope.tenant]
    since = (now - timedelta(minutes=THROUGHPUT_MINUTES - 1)).replace(second=0, microsecond=0)
    await roll_up_minutes(now)
    async with session_scope() as session:
        repo = ConsoleRepository(session)
        finished = await repo.finished_per_minute(scope, since)
        running = await repo.running_jobs(scope, RUNNING_SHOWN)
        letters = await DeadLetterRepository(session).open_letters(scope.tenant)
        sinks = await repo.sink_health()
    by_status: dict[str, int] = {}
    by_type: dict[str, dict[str, int]] = {}
    for row in live:
        by_status[row.status] = by_status.get(row.status, 0) + row.count
        counts = by_type.setdefault(row.report_type, {})
        counts[row.status] = counts.get(row.status, 0) + row.count
    per_minute: dict[str, list[int]] = {}
    for label, status, n in finished:
        slot = per_minute.setdefault(label, [0, 0])
        slot[0 if status == "done" else 1] += n
        by_status[f"{status} (1 h)"] = by_status.get(f"{status} (1 h)", 0) + n
    throughput = []
    for i in range(THROUGHPUT_MINUTES):
        at = since + timedelta(minutes=i)
        done, dead = per_minute.get(at.strftime("%Y-%m-%d %H:%M"), [0, 0])
        throughput.append((at.strftime("%H:%M"), done, dead))
    oldest = [r.oldest_eligible_since for r in live if r.oldest_eligible_since is not None]
    return Overview(
        taken_at=now,
        state_ok=snap.ok,
        by_status=by_status,
        by_type=by_type,
        running=running,
        throughput=throughput,
        oldest_eligible_age_s=max(0.0, (now - min(oldest)).total_seconds()) if oldest else 0.0,
        open_letters=letters,
        workers_live=snap.workers_live,
        scheduler_tick_age_s=snap.scheduler_tick_age_s,
        sinks=sinks,
    )


async def roll_up_minutes(now: datetime) -> None:
    """Store the finished counts of the minutes over since the last roll-up (at most the chart's hour; a
    minute once it is `ROLL_UP_AFTER_S` old, so that its finishes have committed), and forget a day-old
    one: the chart then reads at most a minute or two of report_jobs, whatever the throughput."""
    end = (now - timedelta(seconds=ROLL_UP_AFTER_S)).replace(second=0, microsecond=0)
    earliest = end - timedelta(minutes=THROUGHPUT_MINUTES)
    try:
        async with session_scope() as session:
            repo = ConsoleRepository(session)
            start = max(earliest, await repo.rolled_up_to() or earliest)
            if start < end:
                await repo.roll_up(start, end)
                await repo.forget_minutes(now - timedelta(days=1))
    except Exception as exc:
        if not is_lock_conflict(exc):
            raise
        log.info("another roll-up of the same minutes went first", extra={"error": repr(exc)[:200]})


async def workers(scope: TenantScope) -> tuple[list[ListedProcess], dict[str, list[RunningJob]]]:
    """Live processes, and the running jobs (of the viewer's tenants) by the worker name they run on."""
    processes = await list_processes(include_gone=False)
    async with session_scope() as session:
        running = await ConsoleRepository(session).running_jobs(scope, 1000)
    by_worker: dict[str, list[RunningJob]] = {}
    for job in running:
        by_worker.setdefault(job.worker or "?", []).append(job)
    return processes, by_worker


async def alerts(
    scope: TenantScope, limit: int = 100
) -> tuple[list[SinkHealth], list[AlertRow], list[FailingDestination]]:
    """The alert sinks' health, the recent alert deliveries, and the destinations that gave up deliveries
    in the last day."""
    since = utcnow() - timedelta(days=1)
    async with session_scope() as session:
        repo = ConsoleRepository(session)
        failing = await DeliveryRepository(session).failing_destinations(scope, since)
        return await repo.sink_health(), await repo.recent_alerts(scope, limit), failing


@dataclass(frozen=True)
class JobDetail:
    job: ReportJob
    attempts: list[JobAttempt]  # oldest first
    steps: list[JobStep]  # empty unless a multi-step job


async def job_detail(job_id: str, scope: TenantScope) -> JobDetail:
    """A job with its attempts and steps; NotFound (as the API) for another tenant's job."""
    if not ULID_RE.match(job_id):
        raise NotFound(f"No job {job_id[:40]!r}.")
    job = await jobs.get_job(job_id, scope)
    return JobDetail(job, await list_attempts(job_id, scope), await jobs.list_steps(job_id, scope))


@dataclass(frozen=True)
class ItemOutcome:
    job_id: str
    refusal: str | None  # the service's own message (409, 404 …); None when it was done


async def act_on_jobs(
    action: Literal["cancel", "replay"], job_ids: Sequence[str], scope: TenantScope
) -> list[ItemOutcome]:
    """Cancel or replay each job through the API's own service calls, one at a time, in the viewer's
    tenants; a refused item (already done, another tenant's, …) does not stop the others."""
    outcomes = []
    for job_id in dict.fromkeys(job_ids):  # each once, in the order given
        try:
            if not ULID_RE.match(job_id):
                raise NotFound(f"No job {job_id[:40]!r}.")
            if action == "cancel":
                await jobs.cancel(job_id, scope)
            else:
                await jobs.replay(job_id, scope)
            outcomes.append(ItemOutcome(job_id, None))
        except OrchestratorError as exc:
            outcomes.append(ItemOutcome(job_id, exc.detail))
    return outcomes


async def matching_job_ids(flt: JobFilter) -> list[str]:
    """Every job id the filter matches, newest first (all pages)."""
    ids: list[str] = []
    before_id: str | None = None
    while True:
        page = await jobs.list_jobs(flt, before_id, BULK_PAGE)
        ids += [row.id for row in page.rows]
        if len(page.rows) == BULK_PAGE:
            before_id = page.rows[-1].id
        elif page.resume_before:
            before_id = page.resume_before
        else:
            return ids


async def replay_dead_jobs(job_ids: Sequence[str]) -> int:
    """Bulk replay (admin) of these dead jobs through the service of `POST /v1/dead-letters/replay`."""
    replayed = 0
    for start in range(0, len(job_ids), BULK_PAGE):
        replayed += await jobs.replay_dead_letters(job_ids=job_ids[start : start + BULK_PAGE])
    return replayed


async def letters_to_replay(report_type: str | None, since: datetime | None) -> int:
    """How many jobs `replay_dead_letters(report_type=, since=)` would replay now: the distinct jobs of the
    unreplayed letters it selects (every tenant, archived ones included), read with the same filter."""
    flt = LetterFilter(
        scope=EVERY_TENANT,
        include_archived=True,
        report_type=report_type,
        created_after=since,
        unreplayed_only=True,
    )
    job_ids: set[str] = set()
    before_id: str | None = None
    while page := await list_letters(flt, before_id, BULK_PAGE):
        job_ids.update(row.job_id for row in page)
        before_id = page[-1].id
    return len(job_ids)
