"""SQL of dead letters: add, get, list, resolve, mark replayed, archive and purge, find the ones whose alert
is pending, and what an alert says about later jobs of the same ordering key that wait for the dead one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import and_, delete, func, or_, select
from sqlalchemy.sql import ColumnElement

from app.core.repository import Repository, table_of
from app.core.states import WAITING, AlertStatus, values
from app.core.tenancy import TenantScope
from app.models import DeadLetter, ReportJob

LETTERS = table_of(DeadLetter)
letter = LETTERS.c
JOBS = table_of(ReportJob)
job = JOBS.c


@dataclass(frozen=True)
class LetterFilter:
    scope: TenantScope
    include_archived: bool = False
    report_type: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    job_ids: Sequence[str] = field(default_factory=tuple)
    unreplayed_only: bool = False
    now: datetime | None = None


class DeadLetterRepository(Repository):
    async def add_letter(self, row: DeadLetter) -> None:
        self.session.add(row)
        await self.session.flush()

    async def list_letters(self, flt: LetterFilter, before_id: str | None, limit: int) -> list[DeadLetter]:
        conds: list[ColumnElement[bool]] = []
        if flt.scope.tenant is not None:
            conds.append(letter.tenant == flt.scope.tenant)
        if not flt.include_archived:
            conds.append(letter.archived_at.is_(None))
            conds.append(letter.expire_at > (flt.now or datetime.now(UTC)))
        if flt.report_type:
            conds.append(letter.report_type == flt.report_type)
        if flt.created_after:
            conds.append(letter.created_at >= flt.created_after)
        if flt.created_before:
            conds.append(letter.created_at < flt.created_before)
        if flt.job_ids:
            conds.append(letter.job_id.in_(list(flt.job_ids)))
        if flt.unreplayed_only:
            conds.append(letter.replayed_at.is_(None))
        if before_id:
            conds.append(letter.id < before_id)
        stmt = select(DeadLetter).where(and_(*conds)) if conds else select(DeadLetter)
        return await self.all(stmt.order_by(letter.id.desc()).limit(limit), DeadLetter)

    async def get_letter(self, letter_id: str, scope: TenantScope) -> DeadLetter | None:
        stmt = select(DeadLetter).where(letter.id == letter_id).execution_options(populate_existing=True)
        if scope.tenant is not None:
            stmt = stmt.where(letter.tenant == scope.tenant)
        return await self.first(stmt, DeadLetter)

    async def resolve(self, letter_id: str, now: datetime, who: str, reason: str) -> int:
        """Archive an open (unarchived, unreplayed, unresolved) letter as resolved by hand: who and why."""
        stmt = (
            LETTERS.update()
            .where(
                letter.id == letter_id,
                letter.archived_at.is_(None),
                letter.replayed_at.is_(None),
                letter.resolved_at.is_(None),
            )
            .values(archived_at=now, resolved_at=now, resolved_by=who, resolution=reason)
        )
        return await self.rowcount(stmt)

    async def archive_open_of_job(self, job_id: str, now: datetime) -> int:
        """Archive a job's letters still open (earlier deaths', replayed since): its fate is settled."""
        stmt = (
            LETTERS.update()
            .where(letter.job_id == job_id, letter.archived_at.is_(None))
            .values(archived_at=now)
        )
        return await self.rowcount(stmt)

    async def mark_replayed(self, job_id: str, now: datetime) -> int:
        stmt = (
            LETTERS.update()
            .where(letter.job_id == job_id, letter.replayed_at.is_(None))
            .values(replayed_at=now)
        )
        return await self.rowcount(stmt)

    async def archive_expired(self, now: datetime) -> int:
        stmt = (
            LETTERS.update()
            .where(letter.archived_at.is_(None), letter.expire_at <= now)
            .values(archived_at=now)
        )
        return await self.rowcount(stmt)

    async def purge_archived(self, archived_before: datetime) -> int:
        stmt = delete(LETTERS).where(letter.archived_at.is_not(None), letter.archived_at <= archived_before)
        return await self.rowcount(stmt)

    async def letters_to_republish(self, now: datetime, created_before: datetime, limit: int) -> list[str]:
        stmt = (
            select(letter.id)
            .where(
                letter.alert_status == AlertStatus.PENDING.value,
                letter.created_at <= created_before,
                or_(letter.alert_next_at.is_(None), letter.alert_next_at <= now),
            )
            .order_by(letter.created_at)
            .limit(limit)
        )
        return await self.all(stmt, str)

    async def job_traceparents(self, job_ids: Sequence[str]) -> dict[str, str]:
        """The stored trace context of each of these jobs that has one (tracing joins their traces)."""
        if not job_ids:
            return {}
        stmt = select(job.id, job.traceparent).where(job.id.in_(list(job_ids)), job.traceparent.is_not(None))
        return {str(row[0]): str(row[1]) for row in (await self.session.execute(stmt)).all()}

    async def waiting_successors(self, job_ids: set[str]) -> dict[str, tuple[str, int]]:
        """For dead jobs with an ordering key: (key, how many later jobs of it wait for them)."""
        if not job_ids:
            return {}
        stmt = select(ReportJob).where(job.id.in_(list(job_ids)), job.ordering_key.is_not(None))
        out: dict[str, tuple[str, int]] = {}
        for dead in await self.all(stmt, ReportJob):
            assert dead.ordering_key is not None
            count = (
                select(func.count())
                .select_from(JOBS)
                .where(
                    job.tenant == dead.tenant,
                    job.ordering_key == dead.ordering_key,
                    job.ordering_seq > dead.ordering_seq,
                    job.on_predecessor_dead == "wait",
                    job.status.in_(values(WAITING)),
                )
            )
            out[dead.id] = (dead.ordering_key, int((await self.session.execute(count)).scalar_one()))
        return out
