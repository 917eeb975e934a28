"""The firing engine: due schedules become jobs, one per (schedule, fire time), whatever the replicas.

Each schedule fires in one transaction (row lock, fire records, jobs, next fire); enqueues follow the commit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError

from app.core import failpoints, metrics
from app.core.config import get_settings
from app.core.db import is_db_outage, session_scope
from app.core.errors import Conflict, NotFound
from app.core.states import TERMINAL
from app.core.tenancy import EVERY_TENANT
from app.core.times import utcnow
from app.destinations import delivery, notices
from app.destinations.delivery import stage_notice
from app.dispatch import queue
from app.jobs.building import JobSpec, build_job
from app.jobs.repository import JobRepository
from app.models import ReportJob, Schedule, ScheduleRun
from app.schedules import timing
from app.schedules.run_repository import RunRepository

log = logging.getLogger(__name__)

BATCH = 100
# At most this many fires of one schedule are looked at in one catch-up (the newest): a schedule every second
# that was down for a day records its last MAX_FIRES fires, not 86,400.
MAX_FIRES = 1000
MIN_GRACE = timedelta(seconds=1)
# A manual run takes the first free millisecond from now among this many.
MANUAL_SLOTS = 16
NOTIFIED_SKIPS = ("missed", "overlap")  # skipped fires the owners hear of (not paused or excluded dates)
_MILLISECOND = timedelta(milliseconds=1)


class _Moved(Exception):
    """The schedule changed under us (compare-and-set lost): roll back, it is looked at again."""


@dataclass(frozen=True)
class _Decision:
    fire: datetime
    reason: str | None  # None: submit a job


def ordering_key_of(row: Schedule) -> str | None:
    """Jobs of an `overlap: skip` or `queue` schedule share a key, so they never run side by side (a catch-up
    batch or a manual run waits behind the previous job); `allow` keeps only the schedule's own key."""
    if row.ordering_key:
        return row.ordering_key
    return f"schedule:{row.id}" if row.overlap in ("skip", "queue") else None


def _spec(row: Schedule, fire: datetime) -> JobSpec:
    own_key = bool(row.ordering_key)
    return JobSpec(
        tenant=row.tenant,
        report_type=row.report_type,
        params=dict(row.params),
        max_attempts=row.max_attempts,
        ordering_key=ordering_key_of(row),
        callback_url=row.callback_url,
        deliver_to=row.deliver_to,
        keep_outputs_s=row.keep_outputs_s,
        # The schedule's own key keeps the usual rule; its private key must not stop later fires for good
        # behind one dead run.
        on_predecessor_dead="wait" if own_key else "continue",
        schedule_id=row.id,
        scheduled_for=fire,
        priority=row.priority,
    )


def _excluded(row: Schedule, fire: datetime) -> bool:
    return timing.local(fire, row.timezone).date().isoformat() in set(row.exclude_dates or ())


def misfire_grace(period: timedelta | None) -> timedelta:
    """How late a fire may be and still count as on time: SCHEDULE_MISFIRE_GRACE_S, but never half a period
    or more (a scheduler down across fires of a 2 s cron missed them all, the latest included)."""
    grace = timedelta(seconds=get_settings().schedule_misfire_grace_s)
    # At least a second, whatever the period: the fire loop wakes every 0.5 s and a busy database adds to it.
    return min(grace, max(period / 2, MIN_GRACE)) if period is not None else grace


def decide(
    row: Schedule,
    fires: list[datetime],
    now: datetime,
    previous_busy: bool,
    period: timedelta | None = None,
) -> list[_Decision]:
    """What each fire (oldest first) does: the missed-runs policy, then exclude_dates and overlap. `period`:
    the time from the latest fire to the one after it (it bounds the misfire grace)."""
    grace = misfire_grace(period)
    candidates = [f for f in fires if not _excluded(row, f)]
    current = candidates[-1] if candidates and now - candidates[-1] <= grace else None
    missed = [f for f in candidates if f is not current]
    if row.missed_runs == "skip":
        submit = [current] if current else []
    elif row.missed_runs == "run_all":
        catch_up = missed[-row.max_catch_up :] if row.max_catch_up > 0 else []
        submit = catch_up + ([current] if current else [])
    else:  # run_once: the latest fire, late or not
        submit = candidates[-1:]
    chosen = set(submit)
    decisions = []
    for fire in fires:
        if fire not in candidates:
            decisions.append(_Decision(fire, "excluded_date"))
        elif fire not in chosen:
            decisions.append(_Decision(fire, "missed"))
        elif row.overlap == "skip" and previous_busy:
            decisions.append(_Decision(fire, "overlap"))
        else:
            decisions.append(_Decision(fire, None))
    return decisions


def _next_fire(row: Schedule, clock: timing.Clock, now: datetime) -> datetime | None:
    after = now
    if row.start_at is not None and row.start_at - timedelta(microseconds=1) > after:
        after = row.start_at - timedelta(microseconds=1)
    fire = timing.next_after(clock, after)
    return None if row.end_at is not None and fire > row.end_at else fire


async def _previous_busy(jobs: JobRepository, row: Schedule) -> bool:
    if row.last_job_id is None:
        return False
    job = await jobs.get_job(row.last_job_id, EVERY_TENANT)
    return job is not None and job.status not in TERMINAL


async def _fire_one(schedule_id: str, now: datetime) -> list[ReportJob]:
    """One schedule's due fires in one transaction; the jobs it made (committed, not yet enqueued)."""
    made: list[ReportJob] = []
    staged: list[str] = []  # owners' notices of missed fires, published once this commits
    async with session_scope() as session:
        runs, jobs = RunRepository(session), JobRepository(session)
        row = await runs.lock_schedule(schedule_id)
        if row is None or row.paused or row.next_fire_at is None or row.next_fire_at > now:
            return []  # deleted, paused, or fired by another replica meanwhile
        clock = timing.clock_for(row.cron, row.interval_s, row.timezone, row.start_at or row.created_at)
        last = min(now, row.end_at) if row.end_at is not None else now
        fires = timing.fires_between(clock, row.next_fire_at, last, MAX_FIRES)
        period = timing.next_after(clock, fires[-1]) - fires[-1] if fires else None
        decisions = decide(row, fires, now, await _previous_busy(jobs, row), period)
        # A fire recorded already (a manual run in its millisecond, or next_fire_at set back behind a fire by
        # a writer with a late clock) has had its one job: it is passed over, never inserted again.
        done = await runs.recorded_fires(row.id, fires[0], fires[-1]) if fires else set()
        decisions = [d for d in decisions if d.fire not in done]
        records = []
        for decision in decisions:
            job_id = None
            if decision.reason is None:
                # Distinct created_at, oldest fire first: the order an ordering key follows.
                job = build_job(_spec(row, decision.fire), now + timedelta(microseconds=len(made)))
                await jobs.add_job(job)
                made.append(job)
                job_id = job.id
            records.append(
                ScheduleRun(
                    schedule_id=row.id,
                    fire_time=decision.fire,
                    job_id=job_id,
                    result="submitted" if job_id else "skipped",
                    reason=decision.reason,
                    created_at=now,
                    deadline_at=notices.deadline_at(row, decision.fire) if job_id else None,
                )
            )
            if row.notify_to and decision.reason in NOTIFIED_SKIPS:
                staged += await stage_notice(session, notices.missed(row, decision.fire, decision.reason))
        await runs.add_runs(records)
        values: dict[str, Any] = {"next_fire_at": _next_fire(row, clock, now), "updated_at": now}
        if made:
            values.update(last_fire_at=made[-1].scheduled_for, last_job_id=made[-1].id)
        if await runs.advance(row, values) != 1:
            raise _Moved(schedule_id)
        await failpoints.hit("schedule.before_fire_commit")
    await delivery.publish(staged)
    return made


async def _publish(made: list[ReportJob]) -> None:
    for job in made:
        metrics.count_submitted(job)
        # Never raises; a lost enqueue is re-enqueued by the scheduler's reconciliation.
        await queue.enqueue_run(
            job.id, job.replay_count, traceparent=job.traceparent, lane=queue.lane_of(job)
        )


async def fire_due(now: datetime | None = None) -> int:
    """Fire every schedule due at `now`: returns the number of jobs submitted. A schedule another replica
    fired first is left alone; one whose fire was recorded meanwhile (unique key) is looked at once more,
    which passes that fire over; one that cannot fire is logged and left due (retried next time); a
    database outage propagates to the caller, which backs off."""
    now = now or utcnow()
    submitted = 0
    leave_out: set[str] = set()
    conflicted: set[str] = set()
    while True:
        async with session_scope() as session:
            due = await RunRepository(session).due_schedule_ids(now, BATCH, leave_out)
        again = False
        for schedule_id in due:
            try:
                made = await _fire_one(schedule_id, now)
            except (IntegrityError, _Moved):
                # Looked at once more at once: that attempt sees the fires recorded meanwhile, passes them
                # over and moves next_fire_at past them (a conflict never leaves the schedule stuck on them).
                log.info("schedule fired elsewhere meanwhile", extra={"schedule_id": schedule_id})
                if schedule_id in conflicted:
                    leave_out.add(schedule_id)
                else:
                    conflicted.add(schedule_id)
                    again = True
                continue
            except Exception as exc:
                if is_db_outage(exc):
                    raise
                log.exception("schedule cannot fire", extra={"schedule_id": schedule_id})
                leave_out.add(schedule_id)
                continue
            if not made:
                leave_out.add(schedule_id)
            await _publish(made)
            submitted += len(made)
        if len(due) < BATCH and not again:
            return submitted


async def earliest_fire() -> datetime | None:
    """When the next schedule is due (None: none is)."""
    async with session_scope() as session:
        return await RunRepository(session).earliest_fire()


async def submit_manual_run(schedule: Schedule) -> ScheduleRun:
    """One job now for `schedule`, whatever its pause, overlap or dates, recorded as a manual run; its
    fire_time is now to the millisecond (the next free one when a fire took that millisecond). It becomes the
    schedule's latest job (`overlap: skip` waits for it); a fire of that very time is then passed over.
    """
    now = utcnow()
    now = now.replace(microsecond=now.microsecond // 1000 * 1000)
    try:
        async with session_scope() as session:
            runs, jobs = RunRepository(session), JobRepository(session)
            row = await runs.lock_schedule(schedule.id)
            if row is None:
                raise NotFound(f"No schedule {schedule.id!r}.")
            taken = await runs.recorded_fires(row.id, now, now + _MILLISECOND * MANUAL_SLOTS)
            while now in taken:
                now += _MILLISECOND
            job = build_job(_spec(row, now), now)
            await jobs.add_job(job)
            run = ScheduleRun(
                schedule_id=row.id,
                fire_time=now,
                job_id=job.id,
                result="submitted",
                manual=True,
                created_at=now,
            )
            await runs.add_runs([run])
            if await runs.record_manual(row, {"last_job_id": job.id, "updated_at": now}) != 1:
                raise Conflict(f"Schedule {schedule.id} changed while triggering; try again.")
    except IntegrityError as exc:
        raise Conflict(f"Schedule {schedule.id} already has a run at {now.isoformat()}; try again.") from exc
    await _publish([job])
    return run
