"""SQL of the scheduler's sweeps: jobs waiting to run, a keyset page at a time (reconciliation), and finished
jobs past retention, a keyset page of one status at a time (deleted with their attempts, deliveries, steps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Delete, Select, and_, delete, or_, select

from app.core.repository import Repository, table_of
from app.core.states import TERMINAL, WAITING, JobStatus, values
from app.models import (
    CallbackDelivery,
    DeadLetter,
    JobAttempt,
    JobStep,
    RemoteAttempt,
    ReportDelivery,
    ReportJob,
)

JOBS = table_of(ReportJob)
job = JOBS.c
letter = table_of(DeadLetter).c
# What names a job and goes with it: their foreign keys are ON DELETE CASCADE, so the job's guarded DELETE
# takes them in the same statement (a job it keeps keeps them). Dead letters cascade too, which is why a job
# any letter names is never expired.
JOB_CHILDREN = (
    table_of(JobAttempt),
    table_of(CallbackDelivery),
    table_of(JobStep),
    table_of(ReportDelivery),  # its deliveries and notices: their record goes with the job
    table_of(RemoteAttempt),  # what an outside service reported of its attempts (HTTP reports)
)


@dataclass(frozen=True)
class Expiry:
    """Retention's cut-offs: a finished job goes once finished before `finished_before`; one holding an
    Idempotency-Key, once also created before `idempotent_before` (the key's TTL)."""

    finished_before: datetime
    idempotent_before: datetime
    now: datetime | None = None  # a job's keep_until holds it until then (None: finished_before)


@dataclass(frozen=True)
class RetentionEntry:
    """A job finished before retention's cut-off as a page lists it: its place in the (status, finished_at,
    id) index (the walk's cursor), and whether it may go (not if a dead letter or an Idempotency-Key keeps
    it)."""

    id: str
    finished_at: datetime
    expired: bool
    replay_count: int = 0  # the replay read: only its files and older ones go (a replay since keeps its own)

    @classmethod
    def of(cls, row: Any) -> RetentionEntry:
        return cls(row[0], row[1], bool(row[2]), int(row[3]))


def still_expired(expiry: Expiry) -> list[ColumnElement[bool]]:
    """Past retention, past its Idempotency-Key's TTL and its `keep_until` (a schedule's keep_outputs_s),
    named by no dead letter (the archive keeps its history): what the page reads and the DELETE repeats."""
    has_letter = select(letter.id).where(letter.job_id == job.id).exists()
    now = expiry.now or expiry.finished_before
    return [
        job.finished_at < expiry.finished_before,
        or_(job.idempotency_key.is_(None), job.created_at < expiry.idempotent_before),
        or_(job.keep_until.is_(None), job.keep_until < now),
        ~has_letter,
    ]


@dataclass(frozen=True)
class WaitingJob:
    """What reconciliation needs of a job waiting to run: its message's id, when it is due, its trace, its
    lane."""

    id: str
    status: JobStatus
    replay_count: int
    next_attempt_at: datetime | None
    run_at: datetime | None
    updated_at: datetime
    traceparent: str | None
    priority: int
    tenant: str
    report_type: str
    on_predecessor_dead: str = "wait"
    ordering_seq: int | None = None
    blocker_status: str | None = None  # its recorded `blocked_by` job as read: status, resolved_at, place
    blocker_resolved_at: datetime | None = None
    blocker_seq: int | None = None

    @classmethod
    def of(cls, row: Any) -> WaitingJob:
        return cls(row[0], JobStatus(row[1]), *row[2:])

    def behind_its_predecessor(self) -> bool:
        """Its recorded predecessor (`blocked_by`, the nearest that must finish first) still holds it back:
        that one's end wakes it (`wake_next_in_order`), and a message now would only be claimed, refused and
        dropped again. The rule of `ordering_blocker_query`, for the one job recorded."""
        if self.blocker_status == JobStatus.RUNNING.value:
            return True  # a running job of the key holds every other back, whatever its place
        if self.blocker_seq is None or self.ordering_seq is None or self.blocker_seq >= self.ordering_seq:
            return False  # not placed before it: only a running one would hold it back
        if self.blocker_status in UNFINISHED:
            return True
        waits_on_dead = self.on_predecessor_dead != "continue" and self.blocker_resolved_at is None
        return self.blocker_status == JobStatus.DEAD.value and waits_on_dead


WAITING_COLUMNS = (
    job.id,
    job.status,
    job.replay_count,
    job.next_attempt_at,
    job.run_at,
    job.updated_at,
    job.traceparent,
    job.priority,
    job.tenant,
    job.report_type,
    job.on_predecessor_dead,
    job.ordering_seq,
)
BLOCKER_TABLE = JOBS.alias("blocker")
BLOCKER = BLOCKER_TABLE.c
UNFINISHED = frozenset(values(WAITING | {JobStatus.RUNNING}))


def _with_blocker(query: Select[Any]) -> Select[Any]:
    """Each waiting job with its recorded predecessor's status, resolved_at and place: one primary-key probe
    a row."""
    return query.add_columns(BLOCKER.status, BLOCKER.resolved_at, BLOCKER.ordering_seq).outerjoin(
        BLOCKER_TABLE, BLOCKER.id == job.blocked_by
    )


def waiting_page_query(status: JobStatus, after_id: str, limit: int) -> Select[Any]:
    """Up to `limit` jobs in `status` with an id above `after_id`, in id order. The page's ids come from a
    range of the (status, id) index alone, then each row by its key: a page reads `limit` index entries and
    `limit` rows whatever the backlog and wherever the cursor is (one status per query: an OR over statuses
    scans the primary key; reading the columns straight off the index made MariaDB scan the status from its
    first entry; and at 10M rows it chose (status, finished_at), NULL for every waiting job, and sorted the
    whole backlog: the index is named)."""
    page = (
        select(job.id)
        .with_hint(JOBS, "FORCE INDEX (ix_report_jobs_status_id)", dialect_name="mysql")
        .where(job.status == status.value, job.id > after_id)
        .order_by(job.id)
        .limit(limit)
        .subquery("page")
    )
    query = select(*WAITING_COLUMNS).select_from(JOBS.join(page, page.c.id == job.id))
    return _with_blocker(query).order_by(job.id)


def retention_page_query(
    status: JobStatus, expiry: Expiry, after: RetentionEntry | None, limit: int
) -> Select[Any]:
    """The next `limit` jobs in `status` finished before the cut-off, after `after` in (finished_at, id)
    order, each with whether it may go. The page is a range of the (status, finished_at) index alone (its
    entries end with the id): `limit` entries read whatever the table holds, kept jobs passed over once a
    walk; then each row by its key and a probe of the dead letters' job_id index. Conditions on the row
    in the page's own WHERE made MariaDB turn NOT EXISTS into a scan of the letters' index and walk the
    status without the cut-off; a row comparison (finished_at, id) > (…) is no range for it either."""
    in_range = [job.status == status.value, job.finished_at < expiry.finished_before]
    if after is not None:
        in_range.append(
            or_(
                job.finished_at > after.finished_at,
                and_(job.finished_at == after.finished_at, job.id > after.id),
            )
        )
    page = (
        select(job.id, job.finished_at)
        .with_hint(JOBS, "FORCE INDEX (ix_report_jobs_status_finished)", dialect_name="mysql")
        .where(*in_range)
        .order_by(job.finished_at, job.id)
        .limit(limit)
        .subquery("page")
    )
    expired = and_(*still_expired(expiry)).label("expired")
    return select(page.c.id, page.c.finished_at, expired, job.replay_count).select_from(
        page.join(JOBS, job.id == page.c.id)
    )


def retention_delete(job_ids: Sequence[str], expiry: Expiry) -> Delete:
    """Those of `job_ids` still expired (a replay in between brought a cancelled job back to life; a dead
    letter or an Idempotency-Key may have come): one guarded DELETE repeating the conditions, by primary key.
    Attempts, callback deliveries and steps go with each job in the same statement (ON DELETE CASCADE)."""
    return delete(JOBS).where(
        job.id.in_(sorted(job_ids)), job.status.in_(values(TERMINAL)), *still_expired(expiry)
    )


class MaintenanceRepository(Repository):
    async def waiting_page(self, status: JobStatus, after_id: str, limit: int) -> list[WaitingJob]:
        stmt = waiting_page_query(status, after_id, limit)
        return [WaitingJob.of(row) for row in (await self.session.execute(stmt)).all()]

    async def waiting_among(self, job_ids: Sequence[str]) -> list[WaitingJob]:
        """Those of `job_ids` still waiting to run (pending, retrying, scheduled)."""
        if not job_ids:
            return []
        stmt = _with_blocker(
            select(*WAITING_COLUMNS).where(job.id.in_(list(job_ids)), job.status.in_(values(WAITING)))
        )
        return [WaitingJob.of(row) for row in (await self.session.execute(stmt)).all()]

    async def retention_page(
        self, status: JobStatus, expiry: Expiry, after: RetentionEntry | None, limit: int
    ) -> list[RetentionEntry]:
        """A page of `retention_page_query`, in (finished_at, id) order."""
        stmt = retention_page_query(status, expiry, after, limit)
        rows = [RetentionEntry.of(row) for row in (await self.session.execute(stmt)).all()]
        return sorted(rows, key=lambda entry: (entry.finished_at, entry.id))

    async def delete_expired(self, job_ids: Sequence[str], expiry: Expiry) -> int:
        """Delete those of `job_ids` still expired; returns how many went (see `retention_delete`)."""
        if not job_ids:
            return 0
        return await self.rowcount(retention_delete(job_ids, expiry))
