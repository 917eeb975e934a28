"""Owners' notices of a schedule (`notify_to`): a fire's job that died, ran much slower than usual, was not
done by the schedule's `deadline`, a fire missed or skipped; each subject reaches each destination once.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.config import get_settings
from app.core.states import JobStatus
from app.destinations.delivery import Notice, stage_notice
from app.destinations.repository import DeliveryRepository, DestinationRepository
from app.models import ReportJob, Schedule


def local_label(moment: datetime, zone: str) -> str:
    return f"{moment.astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M} {zone}"


def deadline_at(schedule: Schedule, fire: datetime) -> datetime | None:
    """When a fire's job must be done: the schedule's `deadline` (HH:MM, its zone) on the fire's local day,
    or the next day when that is not after the fire (a 23:00 fire with a 01:00 deadline)."""
    if not schedule.deadline:
        return None
    zone = ZoneInfo(schedule.timezone)
    local_fire = fire.astimezone(zone)
    hour, minute = (int(part) for part in schedule.deadline.split(":"))
    due = datetime.combine(local_fire.date(), time(hour, minute), tzinfo=zone)
    if due <= local_fire:
        due = datetime.combine(local_fire.date() + timedelta(days=1), time(hour, minute), tzinfo=zone)
    return due


def missed(schedule: Schedule, fire: datetime, reason: str) -> Notice:
    why = {"missed": "no scheduler was running at its time", "overlap": "the previous run was still going"}
    return Notice(
        tenant=schedule.tenant,
        event="missed",
        subject=f"missed:{schedule.id}:{fire.isoformat()}",
        destination_ids=list(schedule.notify_to or []),
        title=f"Schedule {schedule.name} did not run at {local_label(fire, schedule.timezone)}",
        lines=[
            ("Schedule", schedule.name),
            ("Report", schedule.report_type),
            ("Why", why.get(reason, reason)),
        ],
        schedule_id=schedule.id,
    )


def late(schedule: Schedule, fire: datetime, due: datetime, job: ReportJob | None, waits: str) -> Notice:
    state = job.status.value if job is not None else "gone"
    lines = [
        ("Schedule", schedule.name),
        ("Report", schedule.report_type),
        ("Fire", local_label(fire, schedule.timezone)),
        ("Deadline", local_label(due, schedule.timezone)),
        ("State", state),
    ]
    if waits:
        lines.append(("Waiting for", waits))
    return Notice(
        tenant=schedule.tenant,
        event="late",
        subject=f"late:{schedule.id}:{fire.isoformat()}",
        destination_ids=list(schedule.notify_to or []),
        title=f"{schedule.name} is late: not done by {local_label(due, schedule.timezone)} ({state})",
        lines=lines,
        job_id=job.id if job is not None else None,
        schedule_id=schedule.id,
    )


SLOW_SAMPLES = 20  # the type's recent runs a slow run is measured against (at least this many, the last 100)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


async def owners(session: AsyncSession, job: ReportJob, event: str) -> tuple[list[str], Schedule | None]:
    """Who hears `event` of this job: its schedule's `notify_to` and the tenant's routes for it (ids)."""
    _, schedule = await DeliveryRepository(session).job_and_schedule(job.id)
    ids = list(schedule.notify_to or []) if schedule is not None else []
    for destination_id in await DestinationRepository(session).routes_for(job.tenant, job.report_type, event):
        if destination_id not in ids:
            ids.append(destination_id)
    return ids, schedule


async def slow(session: AsyncSession, job: ReportJob) -> list[str]:
    """A job that just ended done, much slower than its type's recent runs: its owners hear it."""
    if job.status != JobStatus.DONE or job.started_at is None or job.finished_at is None:
        return []
    repo = DeliveryRepository(session)
    ids, schedule = await owners(session, job, "slow")
    if not ids:
        return []
    settings = get_settings()
    took_s = (job.finished_at - job.started_at).total_seconds()
    if took_s <= settings.slow_run_floor_s:
        return []
    recent = await repo.recent_run_times_s(job, 100)
    if len(recent) < SLOW_SAMPLES or took_s <= settings.slow_run_factor * (usual := p95(recent)):
        return []
    what = schedule.name if schedule is not None else job.report_type
    notice = Notice(
        tenant=job.tenant,
        event="slow",
        subject=f"slow:{job.id}:{job.replay_count}",
        destination_ids=ids,
        title=f"{what} was slow: {took_s:.0f} s (its recent p95: {usual:.0f} s)",
        lines=[
            ("Schedule", schedule.name if schedule is not None else "-"),
            ("Report", job.report_type),
            ("Job", job.id),
            ("Took", f"{took_s:.0f} s"),
            ("Recent p95", f"{usual:.0f} s ({len(recent)} runs)"),
        ],
        job_id=job.id,
        schedule_id=job.schedule_id,
    )
    return await stage_notice(session, notice)


async def dead(session: AsyncSession, job_id: str) -> list[str]:
    """A job that just died: its owners hear it (staged in the death's transaction), beside the alert."""
    job, _ = await DeliveryRepository(session).job_and_schedule(job_id)
    if job is None or job.status != JobStatus.DEAD:
        return []
    ids, schedule = await owners(session, job, "dead")
    if not ids:
        return []
    error = (job.last_error or {}).get("message", "") if isinstance(job.last_error, dict) else ""
    fire = job.scheduled_for
    what = schedule.name if schedule is not None else job.report_type
    notice = Notice(
        tenant=job.tenant,
        event="dead",
        subject=f"dead:{job.id}:{job.replay_count}",
        destination_ids=ids,
        title=f"{what} failed: {job.report_type} is dead after {job.attempt} attempts",
        lines=[
            ("Schedule", schedule.name if schedule is not None else "-"),
            ("Fire", local_label(fire, schedule.timezone) if fire and schedule is not None else "-"),
            ("Job", job.id),
            ("Error", str(error)[:300] or "-"),
        ],
        job_id=job.id,
        schedule_id=job.schedule_id,
    )
    return await stage_notice(session, notice)
