"""SQL of the scheduler's sweeps: jobs waiting to run, a keyset page at a time (reconciliation), and finished
jobs past retention (deleted with their attempts, callback deliveries and steps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, delete, or_, select

from app.core.repository import Repository, table_of
from app.core.states import TERMINAL, WAITING, JobStatus, values
from app.models import CallbackDelivery, DeadLetter, JobAttempt, JobStep, ReportJob

JOBS = table_of(ReportJob)
job = JOBS.c
letter = table_of(DeadLetter).c
# Children first: what names a job goes before the job.
JOB_CHILDREN = (table_of(JobAttempt), table_of(CallbackDelivery), table_of(JobStep))


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

    @classmethod
    def of(cls, row: Any) -> WaitingJob:
        return cls(row[0], JobStatus(row[1]), *row[2:])


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
)


def waiting_page_query(status: JobStatus, after_id: str, limit: int) -> Select[Any]:
    """Up to `limit` jobs in `status` with an id above `after_id`, in id order. The page's ids come from a
    range of the (status, id) index alone, then each row by its key: a page reads `limit` index entries and
    `limit` rows whatever the backlog and wherever the cursor is (one status per query: an OR over statuses
    scans the primary key; reading the columns straight off the index made MariaDB scan the status from its
    first entry)."""
    page = (
        select(job.id)
        .where(job.status == status.value, job.id > after_id)
        .order_by(job.id)
        .limit(limit)
        .subquery("page")
    )
    return select(*WAITING_COLUMNS).select_from(JOBS.join(page, page.c.id == job.id)).order_by(job.id)


class MaintenanceRepository(Repository):
    async def waiting_page(self, status: JobStatus, after_id: str, limit: int) -> list[WaitingJob]:
        stmt = waiting_page_query(status, after_id, limit)
        return [WaitingJob.of(row) for row in (await self.session.execute(stmt)).all()]

    async def waiting_among(self, job_ids: Sequence[str]) -> list[WaitingJob]:
        """Those of `job_ids` still waiting to run (pending, retrying, scheduled)."""
        if not job_ids:
            return []
        stmt = select(*WAITING_COLUMNS).where(job.id.in_(list(job_ids)), job.status.in_(values(WAITING)))
        return [WaitingJob.of(row) for row in (await self.session.execute(stmt)).all()]

    async def expired_job_ids(
        self, finished_before: datetime, idempotent_before: datetime, limit: int
    ) -> list[str]:
        """Finished jobs past retention. A job stays while any dead letter names it (the archive keeps its
        history), and a job holding an Idempotency-Key stays at least until the key's TTL is over."""
        has_letter = select(letter.id).where(letter.job_id == job.id).exists()
        stmt = (
            select(job.id)
            .where(
                job.finished_at < finished_before,
                or_(job.idempotency_key.is_(None), job.created_at < idempotent_before),
                job.status.in_(values(TERMINAL)),
                ~has_letter,
            )
            .limit(limit)
        )
        return await self.all(stmt, str)

    async def delete_jobs(self, job_ids: Sequence[str]) -> int:
        ids = list(job_ids)
        for child in JOB_CHILDREN:
            await self.session.execute(delete(child).where(child.c.job_id.in_(ids)))
        return await self.rowcount(delete(JOBS).where(job.id.in_(ids)))
