"""SQL of the schedules API: insert, read (tenant-scoped), list by keyset, update and delete schedules.

The firing side's queries (due schedules, fire records) live in `run_repository.py`.
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

    async def get(self, schedule_id: str, scope: TenantScope) -> Schedule | None:
        stmt = select(Schedule).where(sched.id == schedule_id).execution_options(populate_existing=True)
        if scope.tenant is not None:
            stmt = stmt.where(sched.tenant == scope.tenant)
        return await self.first(stmt, Schedule)

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

    async def update(self, schedule_id: str, values: dict[str, Any]) -> int:
        return await self.rowcount(update(SCHEDULES).where(sched.id == schedule_id).values(**values))

    async def delete(self, schedule_id: str) -> int:
        """The schedule and its run records (the foreign key cascades too); its jobs stay."""
        await self.session.execute(delete(RUNS).where(RUNS.c.schedule_id == schedule_id))
        return await self.rowcount(delete(SCHEDULES).where(sched.id == schedule_id))
