"""The few indexed reads behind the state gauges: live jobs (never the terminal millions), pending
alerts and callbacks. Workers and the scheduler's tick come from app.fleet.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, func, select, type_coerce

from app.core.repository import Repository, table_of
from app.core.states import AlertStatus, CallbackStatus, JobStatus
from app.models import AlertDelivery, CallbackDelivery, ReportJob, UTCDateTime

JOBS = table_of(ReportJob)
job = JOBS.c
LIVE = (JobStatus.PENDING, JobStatus.SCHEDULED, JobStatus.RETRYING, JobStatus.RUNNING)


@dataclass(frozen=True)
class LiveJobs:
    status: str
    report_type: str
    tenant: str
    count: int
    oldest_eligible_since: datetime | None


class StateRepository(Repository):
    async def live_jobs(self, now: datetime) -> list[LiveJobs]:
        """Jobs in a live status by (status, report type, tenant), with the oldest wait among those that
        could start now (due and not behind an ordering-key predecessor: `eligible_at`). Read off the
        live-jobs index alone, in its order: the live statuses' entries, never a terminal row."""
        since = job.eligible_at
        oldest = type_coerce(func.min(case((since <= now, since), else_=None)), UTCDateTime())
        stmt = (
            select(job.status, job.report_type, job.tenant, func.count(), oldest)
            .with_hint(JOBS, "FORCE INDEX (ix_report_jobs_live)", dialect_name="mysql")
            .where(job.status.in_([s.value for s in LIVE]))
            .group_by(job.status, job.report_type, job.tenant)
        )
        rows = (await self.session.execute(stmt)).all()
        return [LiveJobs(str(r[0]), r[1], r[2], int(r[3]), r[4]) for r in rows]

    async def pending_alerts(self) -> dict[str, int]:
        delivery = table_of(AlertDelivery).c
        stmt = (
            select(delivery.sink, func.count())
            .where(delivery.status == AlertStatus.PENDING.value)
            .group_by(delivery.sink)
        )
        return {sink: int(n) for sink, n in (await self.session.execute(stmt)).all()}

    async def pending_callbacks(self) -> int:
        callback = table_of(CallbackDelivery).c
        stmt = select(func.count()).where(callback.status == CallbackStatus.PENDING.value)
        return int((await self.session.execute(stmt)).scalar_one())
