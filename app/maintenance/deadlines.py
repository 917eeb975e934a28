"""The scheduler's deadline check: a fire whose job is not done by its schedule's deadline (or finished after
it) sends its owners one notice, naming the job's state and why it waits; each fire is checked once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.core.db import session_scope
from app.core.states import JobStatus
from app.core.times import utcnow
from app.destinations import delivery, notices
from app.destinations.repository import DeliveryRepository
from app.fairshare.service import waiting_for
from app.models import ReportJob

DEADLINES_A_TICK = 500


def on_time(job: ReportJob | None, due: datetime) -> bool:
    if job is None or job.status != JobStatus.DONE:
        return False
    return job.finished_at is None or job.finished_at <= due


def why_waiting(job: ReportJob | None, waiting: dict[str, Any] | None) -> str:
    if job is None:
        return ""
    if job.blocked_by:
        return f"an earlier job of its ordering key ({job.blocked_by})"
    if waiting:
        return ", ".join(f"{k} {v}" for k, v in waiting.items() if v is not None)
    return ""


async def check_deadlines(now: datetime | None = None) -> int:
    """Notices for the fires whose deadline came since the last check; how many notices were staged."""
    now = now or utcnow()
    async with session_scope() as session:
        due = await DeliveryRepository(session).due_deadlines(now, DEADLINES_A_TICK)
    if not due:
        return 0
    late = [(fired, sched, job) for fired, sched, job in due if not on_time(job, fired.deadline_at or now)]
    jobs = [job for _, _, job in late if job is not None]
    waiting = {job.id: wait for job, wait in zip(jobs, await waiting_for(jobs), strict=True)}
    staged: list[str] = []
    async with session_scope() as session:
        for fired, schedule, job in late:
            if not schedule.notify_to or fired.deadline_at is None:
                continue
            why = why_waiting(job, waiting.get(job.id) if job else None)
            notice = notices.late(schedule, fired.fire_time, fired.deadline_at, job, why)
            staged += await delivery.stage_notice(session, notice)
        await DeliveryRepository(session).clear_deadlines([fired.id for fired, _, _ in due if fired.id])
    await delivery.publish(staged)
    return len(staged)
