"""Owners' notices of a schedule (`notify_to`): a fire's job that died, a fire's job not done by the
schedule's `deadline`, a fire missed or skipped; each subject reaches each destination once.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import JobStatus
from app.destinations.delivery import Notice, stage_notice
from app.destinations.repository import DeliveryRepository
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


async def dead(session: AsyncSession, job: ReportJob) -> list[str]:
    """A schedule's job that just died: its owners hear it (staged in the death's transaction)."""
    if job.status != JobStatus.DEAD or job.schedule_id is None:
        return []
    _, schedule = await DeliveryRepository(session).job_and_schedule(job.id)
    if schedule is None or not schedule.notify_to:
        return []
    error = (job.last_error or {}).get("message", "") if isinstance(job.last_error, dict) else ""
    fire = job.scheduled_for
    notice = Notice(
        tenant=job.tenant,
        event="dead",
        subject=f"dead:{job.id}:{job.replay_count}",
        destination_ids=list(schedule.notify_to),
        title=f"{schedule.name} failed: {job.report_type} is dead after {job.attempt} attempts",
        lines=[
            ("Schedule", schedule.name),
            ("Fire", local_label(fire, schedule.timezone) if fire else "-"),
            ("Job", job.id),
            ("Error", str(error)[:300] or "-"),
        ],
        job_id=job.id,
        schedule_id=schedule.id,
    )
    return await stage_notice(session, notice)
