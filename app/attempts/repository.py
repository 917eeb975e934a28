"""SQL of attempts: the start and running-attempt compare-and-sets on the job, attempt rows, the heartbeat,
stuck attempts, and the note on a lost attempt whose worker answered late.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, insert, select

from app.core.repository import Repository, table_of
from app.core.states import AttemptKey, AttemptOutcome, JobStatus
from app.models import JobAttempt, ReportJob

JOBS = table_of(ReportJob)
ATTEMPTS = table_of(JobAttempt)
job = JOBS.c
attempt = ATTEMPTS.c
ATTEMPTS_INSERT = insert(ATTEMPTS)


def _attempt_row(key: AttemptKey, outcome: AttemptOutcome) -> list[ColumnElement[bool]]:
    """The WHERE of the attempt `key` while it is still `outcome` (running: not finished by anyone else)."""
    return [
        attempt.job_id == key.job_id,
        attempt.attempt == key.attempt,
        attempt.replay == key.replay,
        attempt.outcome == outcome.value,
    ]


class AttemptRepository(Repository):
    async def start(self, row: ReportJob, now: datetime, worker: str) -> int:
        """Move a startable job to running as attempt + 1; 0 rows means someone else won."""
        return await self.guarded_update(
            JOBS,
            [
                job.id == row.id,
                job.status == row.status.value,
                job.attempt == row.attempt,
                job.replay_count == row.replay_count,
            ],
            {
                "status": JobStatus.RUNNING.value,
                "attempt": job.attempt + 1,
                "attempts_total": job.attempts_total + 1,
                "heartbeat_at": now,
                "started_at": now,
                "next_attempt_at": None,
                "worker": worker,
                "updated_at": now,
            },
            from_statuses={row.status},
        )

    async def update_running(self, key: AttemptKey, values: dict[str, Any]) -> int:
        """Update a job only while `key` is still its running attempt (a status in `values` must be a move
        the state table allows from running)."""
        return await self.guarded_update(
            JOBS,
            [
                job.id == key.job_id,
                job.status == JobStatus.RUNNING.value,
                job.attempt == key.attempt,
                job.replay_count == key.replay,
            ],
            values,
            from_statuses={JobStatus.RUNNING},
        )

    async def cancel_requested(self, key: AttemptKey) -> bool | None:
        """Whether this attempt was asked to stop; None if it is no longer the job's running attempt."""
        stmt = select(job.status, job.attempt, job.replay_count, job.cancel_requested).where(
            job.id == key.job_id
        )
        row = (await self.session.execute(stmt)).first()
        if row is None:
            return None
        mine = (
            row.status == JobStatus.RUNNING.value
            and row.attempt == key.attempt
            and row.replay_count == key.replay
        )
        return bool(row.cancel_requested) if mine else None

    async def uncount_attempt(self, job_id: str) -> None:
        """A handed-back attempt does not count towards the job's total."""
        await self.session.execute(
            JOBS.update().where(job.id == job_id).values(attempts_total=job.attempts_total - 1)
        )

    async def stuck_jobs(self, heartbeat_before: datetime, limit: int) -> list[ReportJob]:
        stmt = (
            select(ReportJob)
            .where(job.status == JobStatus.RUNNING.value, job.heartbeat_at < heartbeat_before)
            .order_by(job.heartbeat_at)
            .limit(limit)
        )
        return await self.all(stmt, ReportJob)

    async def add_attempt(self, row: dict[str, Any]) -> None:
        """`row`: every column but the id (`service.new_attempt`)."""
        await self.session.execute(ATTEMPTS_INSERT, row)

    async def finish_attempt(
        self, key: AttemptKey, outcome: AttemptOutcome, now: datetime, error: dict[str, Any] | None
    ) -> int:
        stmt = (
            ATTEMPTS.update()
            .where(*_attempt_row(key, AttemptOutcome.RUNNING))
            .values(outcome=outcome.value, finished_at=now, error=error)
        )
        return await self.rowcount(stmt)

    async def note_late_result(self, key: AttemptKey, outcome: str, now: datetime) -> int:
        """Record on an attempt already declared lost that its worker reported late (and was ignored)."""
        stmt = (
            ATTEMPTS.update()
            .where(*_attempt_row(key, AttemptOutcome.LOST))
            .values(
                error={
                    "type": "LostWorker",
                    "retryable": True,
                    "message": f"no heartbeat; the worker's late result ({outcome}) at "
                    f"{now.isoformat()} was discarded",
                }
            )
        )
        return await self.rowcount(stmt)

    async def list_attempts(self, job_id: str) -> list[JobAttempt]:
        stmt = select(JobAttempt).where(attempt.job_id == job_id).order_by(attempt.replay, attempt.attempt)
        return await self.all(stmt, JobAttempt)
