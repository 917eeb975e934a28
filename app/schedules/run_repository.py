"""SQL of the firing side of schedules: due schedules (locked one at a time), fire records, and the jobs a
fire makes. Fire records carry the unique (schedule_id, fire_time) key that makes each fire happen once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from app.core.repository import Repository, table_of
from app.models import Schedule, ScheduleRun

SCHEDULES = table_of(Schedule)
RUNS = table_of(ScheduleRun)
sched = SCHEDULES.c


class RunRepository(Repository):
    async def list_runs(self, schedule_id: str, before_id: int | None, limit: int) -> list[ScheduleRun]:
        """A schedule's fire records, newest first by id; `before_id` is the keyset cursor."""
        stmt = select(ScheduleRun).where(RUNS.c.schedule_id == schedule_id)
        if before_id is not None:
            stmt = stmt.where(RUNS.c.id < before_id)
        return await self.all(stmt.order_by(RUNS.c.id.desc()).limit(limit), ScheduleRun)

    # ---- firing ------------------------------------------------------------------------------------

    async def due_schedule_ids(self, now: datetime, limit: int, leave_out: set[str]) -> list[str]:
        """Unpaused schedules whose next fire is at or before `now`, earliest first (ix_schedules_due)."""
        stmt = (
            select(sched.id)
            .where(sched.paused.is_(False), sched.next_fire_at <= now)
            .order_by(sched.next_fire_at)
            .limit(limit)
        )
        if leave_out:
            stmt = stmt.where(sched.id.notin_(leave_out))
        return await self.all(stmt, str)

    async def earliest_fire(self) -> datetime | None:
        """The earliest next fire of any unpaused schedule (the fire loop sleeps until then)."""
        stmt = select(func.min(sched.next_fire_at)).where(sched.paused.is_(False))
        return await self.first(stmt, datetime)

    async def lock_schedule(self, schedule_id: str) -> Schedule | None:
        """The schedule as it is now, row-locked until the transaction ends (SQLite: its write lock)."""
        stmt = (
            select(Schedule)
            .where(sched.id == schedule_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        return await self.first(stmt, Schedule)

    async def advance(self, row: Schedule, values: dict[str, Any]) -> int:
        """Compare-and-set on the fire the caller acted on and the version it read: 0 when the schedule was
        paused, changed or moved since. Firing is not a change of the schedule: the version stays."""
        stmt = (
            SCHEDULES.update()
            .where(
                sched.id == row.id,
                sched.next_fire_at == row.next_fire_at,
                sched.version == row.version,
                sched.paused.is_(False),
            )
            .values(**values)
        )
        return await self.rowcount(stmt)

    async def recorded_fires(self, schedule_id: str, first: datetime, last: datetime) -> set[datetime]:
        """The fire times from `first` to `last` (inclusive) already recorded, manual runs included (the
        unique key's index)."""
        stmt = select(RUNS.c.fire_time).where(
            RUNS.c.schedule_id == schedule_id, RUNS.c.fire_time >= first, RUNS.c.fire_time <= last
        )
        return set(await self.all(stmt, datetime))

    async def latest_fire(self, schedule_id: str) -> datetime | None:
        """The latest fire time recorded (manual runs included): a next fire is never at or before it."""
        stmt = select(func.max(RUNS.c.fire_time)).where(RUNS.c.schedule_id == schedule_id)
        return await self.first(stmt, datetime)

    async def record_manual(self, row: Schedule, values: dict[str, Any]) -> int:
        """A manual run's job becomes the schedule's latest (compare-and-set on the job it replaces)."""
        previous = row.last_job_id
        last = sched.last_job_id.is_(None) if previous is None else sched.last_job_id == previous
        return await self.rowcount(SCHEDULES.update().where(sched.id == row.id, last).values(**values))

    async def add_runs(self, runs: list[ScheduleRun]) -> None:
        """Insert fire records; a (schedule_id, fire_time) already recorded raises IntegrityError."""
        self.session.add_all(runs)
        await self.session.flush()
