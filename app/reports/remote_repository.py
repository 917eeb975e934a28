"""SQL of attempts run by an outside service (asynchronous HTTP reports): the attempt's row in
remote_attempts, and the read of whether that attempt is still the job's running one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, delete, insert, select, update

from app.core.attempt_tokens import AttemptClaim
from app.core.repository import Repository, table_of
from app.core.states import JobStatus
from app.models import JobAttempt, RemoteAttempt, ReportJob

REMOTE = table_of(RemoteAttempt)
remote = REMOTE.c
job = table_of(ReportJob).c
attempt = table_of(JobAttempt).c


@dataclass(frozen=True)
class AttemptState:
    """Where the attempt a token names stands: running (and whether a cancel was asked) or how it ended."""

    found: bool
    running: bool = False
    cancel_requested: bool = False
    outcome: str | None = None  # the ended attempt's outcome (lost, cancelled, …), when known


def _row_of(key: tuple[str, int, int]) -> list[ColumnElement[bool]]:
    job_id, replay, attempt_no = key
    return [remote.job_id == job_id, remote.replay == replay, remote.attempt == attempt_no]


def _open_run(claim: AttemptClaim) -> list[ColumnElement[bool]]:
    """The WHERE of the claim's own run of the attempt while no outcome was reported."""
    return [
        *_row_of((claim.job_id, claim.replay, claim.attempt)),
        remote.nonce == claim.nonce,
        remote.outcome.is_(None),
    ]


class RemoteAttemptRepository(Repository):
    async def open(
        self, key: tuple[str, int, int], tenant: str, nonce: str, now: datetime
    ) -> RemoteAttempt | None:
        """The row of a run handed to the service, replacing an earlier run's of the same attempt number (a
        hand-back at shutdown) — unless that run's outcome was reported: then that row is returned and kept
        (the service was answered 202; its file is the attempt's), and no new run is opened."""
        await self.session.execute(delete(REMOTE).where(*_row_of(key), remote.outcome.is_(None)))
        reported = await self.get(key)
        if reported is not None:
            return reported
        job_id, replay, attempt_no = key
        values = {"job_id": job_id, "replay": replay, "attempt": attempt_no, "tenant": tenant}
        await self.session.execute(insert(REMOTE).values(**values, nonce=nonce, created_at=now, seen_at=now))
        return None

    async def get(self, key: tuple[str, int, int]) -> RemoteAttempt | None:
        return await self.first(select(RemoteAttempt).where(*_row_of(key)), RemoteAttempt)

    async def reported(self, key: tuple[str, int, int]) -> RemoteAttempt | None:
        """The attempt's row once no report is being recorded: the job's row is locked first (`state` holds
        it shared while a report is checked and recorded), so a report under way is seen, not missed."""
        await self.session.execute(select(job.id).where(job.id == key[0]).with_for_update())
        return await self.get(key)

    async def touch(self, claim: AttemptClaim, values: dict[str, Any]) -> int:
        """Record the service's word on its open run (contact, progress; the outcome once)."""
        return await self.rowcount(update(REMOTE).where(*_open_run(claim)).values(**values))

    async def state(self, claim: AttemptClaim, beat_after: datetime | None = None) -> AttemptState:
        """Where the claim's attempt stands, the job's row locked (shared) until the caller's commit: the
        stuck scan's guarded update waits for a report being recorded. With `beat_after`, an attempt whose
        worker last beat before it counts as ended ("lost"): the stuck scan may be declaring it so now."""
        stmt = (
            select(
                job.status, job.attempt, job.replay_count, job.tenant, job.cancel_requested, job.heartbeat_at
            )
            .where(job.id == claim.job_id)
            .with_for_update(read=True)
        )
        row = (await self.session.execute(stmt)).first()
        if row is None or row.tenant != claim.tenant:
            return AttemptState(found=False)
        if (
            row.status == JobStatus.RUNNING.value
            and row.attempt == claim.attempt
            and row.replay_count == claim.replay
        ):
            silent = beat_after is not None and row.heartbeat_at is not None and row.heartbeat_at < beat_after
            if silent:
                return AttemptState(found=True, outcome="lost")
            return AttemptState(found=True, running=True, cancel_requested=bool(row.cancel_requested))
        ended = (
            select(attempt.outcome)
            .where(
                attempt.job_id == claim.job_id,
                attempt.replay == claim.replay,
                attempt.attempt == claim.attempt,
            )
            .order_by(attempt.id.desc())
            .limit(1)
        )
        outcome = (await self.session.execute(ended)).scalar()
        return AttemptState(found=True, outcome=None if outcome is None else str(outcome))
