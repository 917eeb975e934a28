"""SQL of the scheduler's sweeps: jobs MySQL says should be queued, and finished jobs past retention
(deleted with their attempts, callback deliveries and steps).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import and_, delete, or_, select

from app.core.repository import Repository, table_of
from app.core.states import TERMINAL, JobStatus, values
from app.models import CallbackDelivery, DeadLetter, JobAttempt, JobStep, ReportJob

JOBS = table_of(ReportJob)
job = JOBS.c
letter = table_of(DeadLetter).c
# Children first: what names a job goes before the job.
JOB_CHILDREN = (table_of(JobAttempt), table_of(CallbackDelivery), table_of(JobStep))


class MaintenanceRepository(Repository):
    async def jobs_due_for_enqueue(self, now: datetime, older_than: datetime, limit: int) -> list[ReportJob]:
        """Jobs MySQL says should be in the queue: pending, retrying past backoff, scheduled past run_at."""
        stmt = (
            select(ReportJob)
            .where(
                or_(
                    and_(job.status == JobStatus.PENDING.value, job.updated_at <= older_than),
                    and_(job.status == JobStatus.RETRYING.value, job.next_attempt_at <= now),
                    and_(job.status == JobStatus.SCHEDULED.value, job.run_at <= now),
                )
            )
            .order_by(job.id)
            .limit(limit)
        )
        return await self.all(stmt, ReportJob)

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
