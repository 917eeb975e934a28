"""The console's own reads, each an index range: finished jobs per minute, running jobs with progress,
open dead letters and recent alert deliveries, always within the viewer's tenants.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, case, func, select

from app.core.repository import Repository, table_of
from app.core.states import AlertStatus, JobStatus
from app.core.tenancy import TenantScope
from app.models import AlertDelivery, DeadLetter, ReportJob

JOBS = table_of(ReportJob)
job = JOBS.c
LETTERS = table_of(DeadLetter)
letter = LETTERS.c
DELIVERIES = table_of(AlertDelivery)
delivery = DELIVERIES.c


@dataclass(frozen=True)
class RunningJob:
    id: str
    report_type: str
    tenant: str
    worker: str | None
    progress: float | None
    started_at: datetime | None
    attempt: int


@dataclass(frozen=True)
class AlertRow:
    sink: str
    status: str
    attempts: int
    sent_at: datetime | None
    next_attempt_at: datetime | None
    last_error: str | None
    created_at: datetime
    letter_id: str
    job_id: str
    report_type: str
    tenant: str


@dataclass(frozen=True)
class SinkHealth:
    sink: str
    pending: int
    last_sent_at: datetime | None
    last_error: str | None


class ConsoleRepository(Repository):
    def _minute(self, column: ColumnElement[datetime]) -> ColumnElement[str]:
        """The minute a timestamp falls in, as text (the one dialect-specific expression here)."""
        if self.session.get_bind().dialect.name == "sqlite":
            return func.strftime("%Y-%m-%d %H:%M", column)
        return func.date_format(column, "%Y-%m-%d %H:%i")

    async def finished_per_minute(self, scope: TenantScope, since: datetime) -> list[tuple[str, str, int]]:
        """(minute "YYYY-MM-DD HH:MM" UTC, done|dead, count) since `since` (status+finished_at index)."""
        minute = self._minute(job.finished_at)
        stmt = (
            select(minute, job.status, func.count())
            .where(job.status.in_([JobStatus.DONE.value, JobStatus.DEAD.value]), job.finished_at >= since)
            .group_by(minute, job.status)
        )
        if scope.tenant is not None:
            stmt = stmt.where(job.tenant == scope.tenant)
        return [(str(m), str(s), int(n)) for m, s, n in (await self.session.execute(stmt)).all()]

    async def running_jobs(self, scope: TenantScope, limit: int) -> list[RunningJob]:
        stmt = (
            select(job.id, job.report_type, job.tenant, job.worker, job.progress, job.started_at, job.attempt)
            .where(job.status == JobStatus.RUNNING.value)
            .order_by(job.started_at)
            .limit(limit)
        )
        if scope.tenant is not None:
            stmt = stmt.where(job.tenant == scope.tenant)
        return [RunningJob(**row._mapping) for row in (await self.session.execute(stmt)).all()]

    async def open_letters(self, scope: TenantScope) -> int:
        stmt = select(func.count()).where(letter.archived_at.is_(None), letter.replayed_at.is_(None))
        if scope.tenant is not None:
            stmt = stmt.where(letter.tenant == scope.tenant)
        return int((await self.session.execute(stmt)).scalar_one())

    async def sink_health(self) -> list[SinkHealth]:
        pending = func.sum(case((delivery.status == AlertStatus.PENDING.value, 1), else_=0))
        stmt = select(delivery.sink, pending, func.max(delivery.sent_at)).group_by(delivery.sink)
        rows = (await self.session.execute(stmt)).all()
        errors = select(delivery.sink, delivery.last_error).where(
            delivery.status == AlertStatus.PENDING.value, delivery.last_error.is_not(None)
        )
        last_error = {s: e for s, e in (await self.session.execute(errors.order_by(delivery.id))).all()}
        return [SinkHealth(s, int(p or 0), sent, last_error.get(s)) for s, p, sent in rows]

    async def recent_alerts(self, scope: TenantScope, limit: int) -> list[AlertRow]:
        stmt = (
            select(
                delivery.sink,
                delivery.status,
                delivery.attempts,
                delivery.sent_at,
                delivery.next_attempt_at,
                delivery.last_error,
                delivery.created_at,
                letter.id.label("letter_id"),
                letter.job_id,
                letter.report_type,
                letter.tenant,
            )
            .join(LETTERS, LETTERS.c.id == delivery.letter_id)
            .order_by(delivery.id.desc())
            .limit(limit)
        )
        if scope.tenant is not None:
            stmt = stmt.where(letter.tenant == scope.tenant)
        return [AlertRow(**row._mapping) for row in (await self.session.execute(stmt)).all()]
