"""SQL of fair share: the tenant and report-type policy rows, and the running jobs whose slots the
dispatch state must hold (rebuilt after a Redis flush, swept when a claim outlived its job).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from app.core.repository import Repository, table_of
from app.core.states import JobStatus
from app.core.times import utcnow
from app.models import ReportJob, ReportTypePolicy, TenantPolicy

TENANTS = table_of(TenantPolicy)
TYPES = table_of(ReportTypePolicy)
JOBS = table_of(ReportJob)
job = JOBS.c


class FairShareRepository(Repository):
    async def tenant_policies(self) -> list[TenantPolicy]:
        return await self.all(select(TenantPolicy).order_by(TENANTS.c.tenant), TenantPolicy)

    async def type_policies(self) -> list[ReportTypePolicy]:
        return await self.all(select(ReportTypePolicy).order_by(TYPES.c.report_type), ReportTypePolicy)

    async def tenant_policy(self, tenant: str) -> TenantPolicy | None:
        return await self.first(select(TenantPolicy).where(TENANTS.c.tenant == tenant), TenantPolicy)

    async def type_policy(self, report_type: str) -> ReportTypePolicy | None:
        stmt = select(ReportTypePolicy).where(TYPES.c.report_type == report_type)
        return await self.first(stmt, ReportTypePolicy)

    async def set_tenant(self, tenant: str, values: dict[str, Any]) -> None:
        """Change a tenant's row, creating it (with the defaults) first if it has none."""
        where = TENANTS.c.tenant == tenant
        await self._upsert(TENANTS, where, {"tenant": tenant, "weight": 1, "paused": False}, values)

    async def set_type(self, report_type: str, values: dict[str, Any]) -> None:
        where = TYPES.c.report_type == report_type
        await self._upsert(TYPES, where, {"report_type": report_type, "paused": False}, values)

    async def _upsert(self, table: Any, where: Any, defaults: dict[str, Any], values: dict[str, Any]) -> None:
        values = {**values, "updated_at": utcnow()}
        if await self.rowcount(update(table).where(where).values(**values)):
            return
        try:
            async with self.session.begin_nested():
                await self.session.execute(insert(table).values(**{**defaults, **values}))
        except IntegrityError:  # created by a concurrent request in between: change it
            await self.session.execute(update(table).where(where).values(**values))

    async def running_jobs(self) -> list[tuple[str, str, str, int, int]]:
        """(job id, tenant, report type, replay, attempt) of every running job."""
        stmt = select(job.id, job.tenant, job.report_type, job.replay_count, job.attempt).where(
            job.status == JobStatus.RUNNING.value
        )
        rows = (await self.session.execute(stmt)).all()
        return [(row[0], row[1], row[2], row[3], row[4]) for row in rows]

    async def running_among(self, job_ids: Sequence[str]) -> set[str]:
        if not job_ids:
            return set()
        stmt = select(job.id).where(job.id.in_(list(job_ids)), job.status == JobStatus.RUNNING.value)
        return set(await self.all(stmt, str))
