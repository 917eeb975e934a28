"""SQL of dead letters: add, get, list, resolve, mark replayed, archive and purge (each keeping the open
letters' count by tenant), find pending alerts, and what an alert says of the jobs waiting for the dead one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, delete, func, or_, select
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.sql import ColumnElement

from app.core.repository import Repository, table_of
from app.core.states import WAITING, AlertStatus, values
from app.core.tenancy import TenantScope
from app.models import DeadLetter, OpenLetterCount, ReportJob

LETTERS = table_of(DeadLetter)
letter = LETTERS.c
JOBS = table_of(ReportJob)
job = JOBS.c
COUNTS = table_of(OpenLetterCount)
ARCHIVE_PAGE = 5000  # expired letters archived a call (a tick): far above any rate of deaths
count = COUNTS.c


def is_open() -> list[ColumnElement[bool]]:
    return [letter.archived_at.is_(None), letter.replayed_at.is_(None)]


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
        """A new (open) letter. Its count goes up in `count_opened`, the transaction's last statement."""
        self.session.add(row)
        await self.session.flush()

    async def count_opened(self, tenant: str, letters: int = 1) -> None:
        """Add to a tenant's open letters (an upsert of its one row). Called last in the transaction that
        opens them, and the closing transitions change it last too: the row lock is the last lock taken."""
        if self.session.get_bind().dialect.name == "sqlite":
            lite = sqlite_insert(COUNTS).values(tenant=tenant, letters=letters)
            upsert: Any = lite.on_conflict_do_update(
                index_elements=["tenant"], set_={"letters": count.letters + lite.excluded.letters}
            )
        else:
            my = mysql_insert(COUNTS).values(tenant=tenant, letters=letters)
            upsert = my.on_duplicate_key_update(letters=count.letters + my.inserted.letters)
        await self.session.execute(upsert)

    async def _count_closed(self, tenant: str, letters: int) -> None:
        if letters:
            stmt = COUNTS.update().where(count.tenant == tenant).values(letters=count.letters - letters)
            await self.session.execute(stmt)

    async def open_letters(self, tenant: str | None) -> int:
        """Open letters of one tenant, or of all: one row a tenant read, however many letters are open."""
        stmt = select(func.coalesce(func.sum(count.letters), 0))
        if tenant is not None:
            stmt = stmt.where(count.tenant == tenant)
        return int((await self.session.execute(stmt)).scalar_one())

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

    async def resolve(self, row: DeadLetter, now: datetime, who: str, reason: str) -> int:
        """Archive an open (unarchived, unreplayed, unresolved) letter as resolved by hand: who and why."""
        stmt = (
            LETTERS.update()
            .where(letter.id == row.id, *is_open(), letter.resolved_at.is_(None))
            .values(archived_at=now, resolved_at=now, resolved_by=who, resolution=reason)
        )
        resolved = await self.rowcount(stmt)
        await self._count_closed(row.tenant, resolved)
        return resolved

    async def _close_of_job(
        self, job_id: str, tenant: str, closed_other_way: ColumnElement[bool], **values: object
    ) -> int:
        """Set `values` on a job's open letters (counted as closed by the rows the guarded UPDATE changed,
        so two closers never both count one), then on those already closed the other way."""
        of_job = letter.job_id == job_id
        closed = await self.rowcount(LETTERS.update().where(of_job, *is_open()).values(**values))
        rest = await self.rowcount(LETTERS.update().where(of_job, closed_other_way).values(**values))
        await self._count_closed(tenant, closed)
        return closed + rest

    async def archive_open_of_job(self, job_id: str, tenant: str, now: datetime) -> int:
        """Archive a job's letters still open (earlier deaths', replayed since): its fate is settled."""
        replayed = and_(letter.archived_at.is_(None), letter.replayed_at.is_not(None))
        return await self._close_of_job(job_id, tenant, replayed, archived_at=now)

    async def mark_replayed(self, job_id: str, tenant: str, now: datetime) -> int:
        archived = and_(letter.replayed_at.is_(None), letter.archived_at.is_not(None))
        return await self._close_of_job(job_id, tenant, archived, replayed_at=now)

    async def archive_expired(self, now: datetime, limit: int = ARCHIVE_PAGE) -> int:
        """Archive up to `limit` letters past their time (the oldest first; the rest on the next call): the
        open ones tenant by tenant, each tenant's count down by what its UPDATE changed, then the replayed
        ones. Rows are locked by primary key only (no range), so a death's insert is never in the way."""
        found = (
            select(letter.id, letter.tenant, letter.replayed_at.is_(None))
            .where(letter.archived_at.is_(None), letter.expire_at <= now)
            .order_by(letter.expire_at)
            .limit(limit)
        )
        open_by_tenant: dict[str, list[str]] = {}
        replayed: list[str] = []
        for letter_id, tenant, still_open in (await self.session.execute(found)).all():
            (open_by_tenant.setdefault(tenant, []) if still_open else replayed).append(letter_id)
        archived = 0
        for tenant, ids in sorted(open_by_tenant.items()):
            stmt = LETTERS.update().where(letter.id.in_(sorted(ids)), *is_open())
            closed = await self.rowcount(stmt.values(archived_at=now))
            await self._count_closed(tenant, closed)
            archived += closed
        if replayed:
            stmt = LETTERS.update().where(letter.id.in_(sorted(replayed)), letter.archived_at.is_(None))
            archived += await self.rowcount(stmt.values(archived_at=now))
        return archived

    async def purge_archived(self, archived_before: datetime, limit: int = ARCHIVE_PAGE) -> int:
        """Delete up to `limit` letters archived before `archived_before`, by primary key (a range DELETE
        would lock the index's gaps, where closing a letter writes its new `archived_at`)."""
        settled = [letter.archived_at.is_not(None), letter.archived_at <= archived_before]
        ids = await self.all(select(letter.id).where(*settled).order_by(letter.archived_at).limit(limit), str)
        if not ids:
            return 0
        return await self.rowcount(delete(LETTERS).where(letter.id.in_(sorted(ids)), *settled))

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
