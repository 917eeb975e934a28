"""SQL of the schedules API: insert, read (tenant-scoped, or locked), list by keyset, change and delete.

Changes are column-wise compare-and-sets on `version`; the firing side's queries live in `run_repository.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, delete, select, update
from sqlalchemy.sql import ColumnElement

from app.core.repository import Repository, table_of
from app.core.tenancy import TenantScope
from app.models import Schedule, ScheduleRun

SCHEDULES = table_of(Schedule)
RUNS = table_of(ScheduleRun)
sched = SCHEDULES.c


@dataclass(frozen=True)
class ScheduleFilter:
    scope: TenantScope
    report_type: str | None = None
    paused: bool | None = None


class ScheduleRepository(Repository):
    async def add(self, row: Schedule) -> None:
        self.session.add(row)
        await self.session.flush()

    async def get(self, schedule_id: str, scope: TenantScope, *, lock: bool = False) -> Schedule | None:
        """`lock`: row-locked until the transaction ends, so no fire is recorded meanwhile (a fire locks it
        first; SQLite: its write lock)."""
        stmt = select(Schedule).where(sched.id == schedule_id).execution_options(populate_existing=True)
        if scope.tenant is not None:
            stmt = stmt.where(sched.tenant == scope.tenant)
        return await self.first(stmt.with_for_update() if lock else stmt, Schedule)

    async def get_by_name(self, tenant: str, name: str) -> Schedule | None:
        return await self.first(select(Schedule).where(sched.tenant == tenant, sched.name == name), Schedule)

    async def list(self, flt: ScheduleFilter, before_id: str | None, limit: int) -> list[Schedule]:
        """Newest first by id (ULIDs sort by creation time); `before_id` is the keyset cursor."""
        conds: list[ColumnElement[bool]] = []
        if flt.scope.tenant is not None:
            conds.append(sched.tenant == flt.scope.tenant)
        if flt.report_type:
            conds.append(sched.report_type == flt.report_type)
        if flt.paused is not None:
            conds.append(sched.paused == flt.paused)
        if before_id:
            conds.append(sched.id < before_id)
        stmt = select(Schedule).where(and_(*conds)) if conds else select(Schedule)
        return await self.all(stmt.order_by(sched.id.desc()).limit(limit), Schedule)

    async def update_if_version(self, schedule_id: str, version: int, values: dict[str, Any]) -> int:
        """Only the columns in `values`, if the schedule is still at `version` (it moves on): 0 when it
        changed (or went) since that version was read."""
        stmt = (
            update(SCHEDULES)
            .where(sched.id == schedule_id, sched.version == version)
            .values(**values, version=sched.version + 1)
        )
        return await self.rowcount(stmt)

    async def pause(self, schedule_id: str, values: dict[str, Any]) -> int:
        """Paused (and `values`) in one column-wise step, whatever else changes meanwhile; 0 when it was
        paused already."""
        stmt = (
            update(SCHEDULES)
            .where(sched.id == schedule_id, sched.paused.is_(False))
            .values(**values, paused=True, version=sched.version + 1)
        )
        return await self.rowcount(stmt)

    async def delete(self, schedule_id: str) -> int:
        """The schedule and its run records (the foreign key cascades too); its jobs stay."""
        await self.session.execute(delete(RUNS).where(RUNS.c.schedule_id == schedule_id))
        return await self.rowcount(delete(SCHEDULES).where(sched.id == schedule_id))
