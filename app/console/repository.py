"""The console's own reads, each an index range: finished jobs per minute, running jobs with progress,
and recent alert deliveries (open dead letters: app.dead_letters), always within the viewer's tenants.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Select, delete, func, literal, select
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from app.core.repository import Repository, table_of
from app.core.states import AlertStatus, JobStatus
from app.core.tenancy import TenantScope
from app.models import AlertDelivery, DeadLetter, FinishedMinute, ReportJob

JOBS = table_of(ReportJob)
job = JOBS.c
LETTERS = table_of(DeadLetter)
letter = LETTERS.c
DELIVERIES = table_of(AlertDelivery)
delivery = DELIVERIES.c
MINUTES = table_of(FinishedMinute)
minute = MINUTES.c
MINUTE_KEY = ["minute", "tenant", "status"]
LETTERS_SCANNED = 200  # a tenant's newest letters whose deliveries the console lists


def _minute_start(label: str) -> datetime:
    """The minute a "YYYY-MM-DD HH:MM" label names, as an aware UTC datetime."""
    return datetime.strptime(label, "%Y-%m-%d %H:%M").replace(tzinfo=UTC)


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
        """(minute "YYYY-MM-DD HH:MM" UTC, done|dead, count) since `since`: the rolled-up minutes (a range
        of finished_minutes' key), then the minutes not rolled up yet, read from report_jobs (a range of the
        status+finished_at index over the last minute or two)."""
        rolled = (
            select(minute.minute, minute.status, func.sum(minute.jobs))
            .where(minute.minute >= since)
            .group_by(minute.minute, minute.status)
        )
        if scope.tenant is not None:
            rolled = rolled.where(minute.tenant == scope.tenant)
        found = [(m.strftime("%Y-%m-%d %H:%M"), str(s), int(n)) for m, s, n in await self._rows(rolled)]
        tail = max(since, await self.rolled_up_to() or since)
        recent = self._finished_by_minute(tail, None, job.tenant if scope.tenant is None else None)
        if scope.tenant is not None:
            recent = recent.where(job.tenant == scope.tenant)
        by_minute: dict[tuple[str, str], int] = {}
        for m, status, _tenant, n in await self._rows(recent):
            by_minute[(str(m), str(status))] = by_minute.get((str(m), str(status)), 0) + int(n)
        return found + [(m, status, n) for (m, status), n in by_minute.items()]

    async def rolled_up_to(self) -> datetime | None:
        """The end of the last minute rolled up (the newest key of finished_minutes)."""
        last = (await self.session.execute(select(func.max(minute.minute)))).scalar_one()
        return None if last is None else last + timedelta(minutes=1)

    async def roll_up(self, start: datetime, end: datetime) -> None:
        """Store the finished counts of the whole minutes in [start, end): each minute's count replaces what
        a concurrent roll-up of the same minute wrote (the same number)."""
        stmt = self._finished_by_minute(start, end, job.tenant)
        rows = [
            {"minute": _minute_start(m), "tenant": t, "status": s, "jobs": int(n)}
            for m, s, t, n in await self._rows(stmt)
        ]
        if not rows:
            return
        if self.session.get_bind().dialect.name == "sqlite":
            lite = sqlite_insert(MINUTES).values(rows)
            upsert: Any = lite.on_conflict_do_update(
                index_elements=MINUTE_KEY, set_={"jobs": lite.excluded.jobs}
            )
        else:
            my = mysql_insert(MINUTES).values(rows)
            upsert = my.on_duplicate_key_update(jobs=my.inserted.jobs)
        await self.session.execute(upsert)

    async def forget_minutes(self, before: datetime) -> None:
        await self.session.execute(delete(MINUTES).where(minute.minute < before))

    def _finished_by_minute(self, start: datetime, end: datetime | None, tenant: Any) -> Select[Any]:
        label = self._minute(job.finished_at)
        ended = [job.status.in_([JobStatus.DONE.value, JobStatus.DEAD.value]), job.finished_at >= start]
        if end is not None:
            ended.append(job.finished_at < end)
        group = [label, job.status] if tenant is None else [label, job.status, tenant]
        return (
            select(label, job.status, tenant if tenant is not None else literal(""), func.count())
            .where(*ended)
            .group_by(*group)
        )

    async def _rows(self, stmt: Select[Any]) -> list[Any]:
        return list((await self.session.execute(stmt)).all())

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

    async def sink_health(self) -> list[SinkHealth]:
        """Per sink: pending deliveries (the status index's pending entries), the last send (a loose scan
        of the (sink, sent_at) index: two entries a sink) and the last error of a pending one."""
        last_sent = select(delivery.sink, func.max(delivery.sent_at)).group_by(delivery.sink)
        sent = {s: at for s, at in (await self.session.execute(last_sent)).all()}
        is_pending = delivery.status == AlertStatus.PENDING.value
        counts = select(delivery.sink, func.count()).where(is_pending).group_by(delivery.sink)
        pending = {s: int(n) for s, n in (await self.session.execute(counts)).all()}
        failing = [is_pending, delivery.last_error.is_not(None)]
        errors = select(delivery.sink, delivery.last_error).where(*failing)
        last_error = {s: e for s, e in (await self.session.execute(errors.order_by(delivery.id))).all()}
        return [SinkHealth(s, pending.get(s, 0), sent[s], last_error.get(s)) for s in sorted(sent)]

    async def recent_alerts(self, scope: TenantScope, limit: int) -> list[AlertRow]:
        """The newest deliveries; for a tenant, those of its newest letters (a range of its letters' index,
        `LETTERS_SCANNED` at most, never the other tenants' deliveries)."""
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
            newest = (
                select(letter.id)
                .where(letter.tenant == scope.tenant)
                .order_by(letter.id.desc())
                .limit(LETTERS_SCANNED)
            )
            ids = list((await self.session.execute(newest)).scalars())
            stmt = stmt.where(delivery.letter_id.in_(ids))
        return [AlertRow(**row._mapping) for row in (await self.session.execute(stmt)).all()]
