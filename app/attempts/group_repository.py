"""SQL of the group commit: a batch of starts or successes in one transaction, every job still guarded by its
own compare-and-set. Runs on `app.core.driver` statements: the MySQL driver's own connection, or a session.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import ColumnElement, Select, Update, bindparam, select, tuple_

from app.attempts.repository import ATTEMPTS, ATTEMPTS_INSERT, JOBS, attempt, job
from app.core.driver import Statements
from app.core.states import AttemptKey, AttemptOutcome, JobStatus, check_transition
from app.jobs.repository import SET_BLOCKED_BY, ordering_blocker_query
from app.models import ReportJob

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
    return select(JOBS).where(_ids_in(job.id, n)).with_for_update()


@cache
def _done_at_attempt(n: int) -> Select[Any]:
    return select(job.id, job.finished_at).where(
        _ids_in(job.id, n),
        _guards_in((job.id, job.attempt, job.replay_count), n),
        job.status == JobStatus.DONE.value,
    )


@cache
def _started_at(n: int) -> Select[Any]:
    return select(job.id).where(
        _ids_in(job.id, n),
        _guards_in((job.id, job.attempt, job.replay_count), n),
        job.status == JobStatus.RUNNING.value,
        job.started_at == bindparam("p_now"),
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


def _key_guards(keys: list[AttemptKey]) -> dict[str, Any]:
    return _sized_params(
        [key.job_id for key in keys], [(key.job_id, key.attempt, key.replay) for key in keys]
    )


class GroupRepository:
    def __init__(self, statements: Statements) -> None:
        self.statements = statements

    async def lock_jobs(self, ids: list[str]) -> dict[str, ReportJob]:
        """The jobs' rows, locked until the transaction ends (on MySQL; SQLite's BEGIN IMMEDIATE already holds
        the only write lock), so that the starts decided from them hold when they are written. The models are
        built without validation (the row is the database's): a tenth of the cost of loading them."""
        result = await self.statements.execute(_lock_jobs(len(ids)), _sized_params(ids))
        return {row["id"]: ReportJob.model_construct(**row) for row in result.rows}

    async def start_many(self, starts: list[tuple[ReportJob, str]], now: datetime) -> int:
        """`AttemptRepository.start` for several jobs, each by its own worker: one statement per worker name
        (a worker process has one), each row's own compare-and-set in its WHERE, so the count tells whether
        every one won."""
        check_transition({row.status for row, _ in starts}, JobStatus.RUNNING)
        by_worker: dict[str, list[ReportJob]] = {}
        for row, worker in starts:
            by_worker.setdefault(worker, []).append(row)
        started = 0
        for worker, rows in by_worker.items():
            guards = [(row.id, row.status.value, row.attempt, row.replay_count) for row in rows]
            params = {**_sized_params([row.id for row in rows], guards), "p_now": now, "p_worker": worker}
            started += (await self.statements.execute(_start_many(len(rows)), params)).rowcount
        return started

    async def add_attempts(self, rows: list[dict[str, Any]]) -> None:
        """One multi-row INSERT; `rows`: every column but the id (`service.new_attempt`)."""
        await self.statements.insert_many(ATTEMPTS_INSERT, rows)

    async def done_at_attempt(self, keys: list[AttemptKey]) -> dict[str, datetime]:
        """The jobs of `keys` that are done at that very attempt (only its success could do that), with
        their finished_at: the winners of a batch whose compare-and-set count came short."""
        result = await self.statements.execute(_done_at_attempt(len(keys)), _key_guards(keys))
        return {row["id"]: row["finished_at"] for row in result.rows}

    async def started_at(self, keys: list[AttemptKey], now: datetime) -> list[str]:
        """The jobs of `keys` running at that attempt since `now`: a start batch's own, once committed."""
        params = {**_key_guards(keys), "p_now": now}
        return [row["id"] for row in (await self.statements.execute(_started_at(len(keys)), params)).rows]

    async def update_running_many(self, keys: list[AttemptKey], values: dict[str, Any]) -> int:
        """`AttemptRepository.update_running` for several attempts at once (same values), each guarded by its
        own key."""
        target = values.get("status")
        if target is not None:
            check_transition({JobStatus.RUNNING}, JobStatus(target))
        stmt = _running_many(tuple(sorted(values)), len(keys))
        params = {**_key_guards(keys), **{f"p_{name}": value for name, value in values.items()}}
        return (await self.statements.execute(stmt, params)).rowcount

    async def finish_attempts(
        self, keys: list[AttemptKey], outcome: AttemptOutcome, now: datetime, error: dict[str, Any] | None
    ) -> int:
        """`AttemptRepository.finish_attempt` for several attempts with the same outcome, in one statement."""
        params = {**_key_guards(keys), "p_outcome": outcome.value, "p_now": now, "p_error": error}
        return (await self.statements.execute(_finish_attempts(len(keys)), params)).rowcount

    async def ordering_blocker(self, row: ReportJob) -> str | None:
        """`JobRepository.ordering_blocker` in this batch's transaction."""
        stmt, params = ordering_blocker_query(row)
        rows = (await self.statements.execute(stmt, params)).rows
        return str(rows[0]["id"]) if rows else None

    async def set_blocked_by(self, job_id: str, blocker: str | None) -> None:
        await self.statements.execute(SET_BLOCKED_BY, {"p_id": job_id, "p_blocker": blocker})
