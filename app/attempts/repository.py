"""SQL of attempts: the start and running-attempt compare-and-sets on the job, attempt rows, the heartbeat,
stuck attempts, and the note on a lost attempt whose worker answered late.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import ColumnElement, Select, Update, bindparam, insert, select, tuple_

from app.core.repository import Repository, table_of
from app.core.states import AttemptKey, AttemptOutcome, JobStatus, check_transition
from app.models import JobAttempt, ReportJob

JOBS = table_of(ReportJob)
ATTEMPTS = table_of(JobAttempt)
job = JOBS.c
attempt = ATTEMPTS.c
ATTEMPTS_INSERT = insert(ATTEMPTS)

# The group commit's statements, built once per batch size: building and cache-keying a statement per batch
# costs more than running it, and an `expanding` IN is re-rendered at every execution. `i{k}` are the batch's
# job ids, `g{k}_{c}` the per-job compare-and-set tuples (`_sized_params` fills both).


def _ids_in(column: Any, n: int) -> ColumnElement[bool]:
    return column.in_([bindparam(f"i{k}") for k in range(n)])


def _guards_in(columns: tuple[Any, ...], n: int) -> ColumnElement[bool]:
    width = len(columns)
    rows = [tuple_(*(bindparam(f"g{k}_{c}") for c in range(width))) for k in range(n)]
    return tuple_(*columns).in_(rows)


def _sized_params(ids: list[str], guards: Sequence[tuple[Any, ...]] = ()) -> dict[str, Any]:
    params = {f"i{k}": job_id for k, job_id in enumerate(ids)}
    params.update({f"g{k}_{c}": value for k, guard in enumerate(guards) for c, value in enumerate(guard)})
    return params


@cache
def _lock_jobs(n: int) -> Select[Any]:
    return select(ReportJob).where(_ids_in(job.id, n)).with_for_update()


@cache
def _lock_running(n: int) -> Select[Any]:
    return (
        select(job.id, job.status, job.attempt, job.replay_count).where(_ids_in(job.id, n)).with_for_update()
    )


@cache
def _start_many(n: int) -> Update:
    return (
        JOBS.update()
        .where(_ids_in(job.id, n), _guards_in((job.id, job.status, job.attempt, job.replay_count), n))
        .values(
            status=JobStatus.RUNNING.value,
            attempt=job.attempt + 1,
            attempts_total=job.attempts_total + 1,
            heartbeat_at=bindparam("p_now"),
            started_at=bindparam("p_now"),
            next_attempt_at=None,
            worker=bindparam("p_worker"),
            updated_at=bindparam("p_now"),
        )
    )


@cache
def _finish_attempts(n: int) -> Update:
    return (
        ATTEMPTS.update()
        .where(
            _ids_in(attempt.job_id, n),
            _guards_in((attempt.job_id, attempt.attempt, attempt.replay), n),
            attempt.outcome == AttemptOutcome.RUNNING.value,
        )
        .values(outcome=bindparam("p_outcome"), finished_at=bindparam("p_now"), error=bindparam("p_error"))
    )


@cache
def _running_many(columns: tuple[str, ...], n: int) -> Update:
    """UPDATE of `columns` on several running attempts' jobs, each guarded by its own key."""
    return (
        JOBS.update()
        .where(
            _ids_in(job.id, n),
            job.status == JobStatus.RUNNING.value,
            _guards_in((job.id, job.attempt, job.replay_count), n),
        )
        .values({name: bindparam(f"p_{name}") for name in columns})
    )


def _attempt_row(key: AttemptKey, outcome: AttemptOutcome) -> list[ColumnElement[bool]]:
    """The WHERE of the attempt `key` while it is still `outcome` (running: not finished by anyone else)."""
    return [
        attempt.job_id == key.job_id,
        attempt.attempt == key.attempt,
        attempt.replay == key.replay,
        attempt.outcome == outcome.value,
    ]


def _key_guards(keys: list[AttemptKey]) -> dict[str, Any]:
    return _sized_params(
        [key.job_id for key in keys], [(key.job_id, key.attempt, key.replay) for key in keys]
    )


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

    async def lock_jobs(self, ids: list[str]) -> dict[str, ReportJob]:
        """The jobs' rows, locked until the transaction ends (on MySQL; SQLite's BEGIN IMMEDIATE already holds
        the only write lock), so that the starts decided from them hold when they are written."""
        rows = (await self.session.execute(_lock_jobs(len(ids)), _sized_params(ids))).scalars().all()
        return {row.id: row for row in rows}

    async def start_many(self, starts: list[tuple[ReportJob, str]], now: datetime) -> int:
        """`start` for several jobs, each by its own worker: one statement per worker name (a worker process
        has one), each row's own compare-and-set in its WHERE, so the count tells whether every one won."""
        check_transition({row.status for row, _ in starts}, JobStatus.RUNNING)
        by_worker: dict[str, list[ReportJob]] = {}
        for row, worker in starts:
            by_worker.setdefault(worker, []).append(row)
        started = 0
        for worker, rows in by_worker.items():
            guards = [(row.id, row.status.value, row.attempt, row.replay_count) for row in rows]
            params = {**_sized_params([row.id for row in rows], guards), "p_now": now, "p_worker": worker}
            result = await self.session.execute(_start_many(len(rows)), params)
            started += int(result.rowcount)  # type: ignore[attr-defined]
        return started

    async def lock_running(self, keys: list[AttemptKey]) -> set[str]:
        """Which of `keys` are still their job's running attempt, with those rows locked until the end of
        the transaction."""
        ids = [key.job_id for key in keys]
        rows = (await self.session.execute(_lock_running(len(ids)), _sized_params(ids))).all()
        current = {row.id: row for row in rows}
        mine: set[str] = set()
        for key in keys:
            row = current.get(key.job_id)
            if (
                row is not None
                and row.status == JobStatus.RUNNING.value
                and row.attempt == key.attempt
                and row.replay_count == key.replay
            ):
                mine.add(key.job_id)
        return mine

    async def update_running_many(self, keys: list[AttemptKey], values: dict[str, Any]) -> int:
        """`update_running` for several attempts at once (same values), each guarded by its own key."""
        target = values.get("status")
        if target is not None:
            check_transition({JobStatus.RUNNING}, JobStatus(target))
        stmt = _running_many(tuple(sorted(values)), len(keys))
        params = {**_key_guards(keys), **{f"p_{name}": value for name, value in values.items()}}
        return int((await self.session.execute(stmt, params)).rowcount)  # type: ignore[attr-defined]

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

    async def add_attempts(self, rows: list[dict[str, Any]]) -> None:
        """One multi-row INSERT (the driver's executemany)."""
        await self.session.execute(ATTEMPTS_INSERT, rows)

    async def finish_attempts(
        self, keys: list[AttemptKey], outcome: AttemptOutcome, now: datetime, error: dict[str, Any] | None
    ) -> int:
        """`finish_attempt` for several attempts with the same outcome, in one statement."""
        params = {**_key_guards(keys), "p_outcome": outcome.value, "p_now": now, "p_error": error}
        stmt = _finish_attempts(len(keys))
        return int((await self.session.execute(stmt, params)).rowcount)  # type: ignore[attr-defined]

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
