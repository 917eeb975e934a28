"""SQL of the jobs domain: insert, read and list jobs, the cancel and replay compare-and-sets, ordering keys.

Every status change is a guarded UPDATE (`Repository.guarded_update`): status + attempt + replay_count must
still be what the caller read, and the move must be in the state table.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, func, insert, literal, or_, select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.sql import ColumnElement, Select

from app.core.db import session_scope
from app.core.driver import driver_autocommit, driver_path_enabled
from app.core.repository import Repository, table_of
from app.core.states import REPLAYABLE, WAITING, AttemptKey, AttemptOutcome, JobStatus, values
from app.core.tenancy import TenantScope
from app.models import JobAttempt, OrderingSequence, ReportJob

JOBS = table_of(ReportJob)
job = JOBS.c
ATTEMPTS = table_of(JobAttempt)
attempt = ATTEMPTS.c
# Values go in as execution parameters, so SQLAlchemy compiles the INSERT once per process.
JOBS_INSERT = insert(JOBS)
SEQUENCES = table_of(OrderingSequence)
sequence = SEQUENCES.c
_SEQUENCE_CREATE = insert(SEQUENCES).prefix_with("IGNORE")  # a key's row, if it has none yet


JOB_COLUMNS = tuple(column.name for column in JOBS.columns if column.computed is None)


def _new_row_values(row: ReportJob) -> dict[str, object]:
    """The INSERT's values of a new row (its id is always set): read from the instance's own dict, which a
    new row has complete, instead of through the ORM's attribute machinery."""
    held = vars(row)
    return {name: held[name] if name in held else getattr(row, name) for name in JOB_COLUMNS}


async def insert_jobs(rows: Sequence[ReportJob]) -> None:
    """New rows in one multi-row INSERT and a transaction of their own: on MySQL the statement alone on an
    autocommit connection's driver (`app.core.driver`: atomic, committed in the same round trip, no per-row
    parameter processing by SQLAlchemy), else through a session."""
    if not rows:
        return
    # A job with an ordering key takes its place on the key in the inserting transaction (a session's).
    if driver_path_enabled() and not any(row.ordering_key for row in rows):
        # One statement: committed by itself, no COMMIT round trip.
        async with driver_autocommit() as tx:
            await tx.insert_many(JOBS_INSERT, [_new_row_values(row) for row in rows])
        return
    async with session_scope() as session:
        await JobRepository(session).add_jobs(rows)


class JobRepository(Repository):
    async def add_job(self, row: ReportJob) -> None:
        await self.add_jobs([row])

    async def add_jobs(self, rows: Sequence[ReportJob]) -> None:
        """Many rows in one multi-row INSERT (executemany; a Core INSERT: the ORM unit of work costs more than
        the statement on this hot path). A keyed row without its place takes the next ones of its key here,
        in row order, so the place is always taken in the transaction that inserts the job."""
        if not rows:
            return
        row_values = [_new_row_values(row) for row in rows]
        by_key: dict[tuple[str, str], list[dict[str, object]]] = {}
        for new in sorted(row_values, key=lambda values: str(values["id"])):  # ids follow request order
            if new["ordering_key"] and new["ordering_seq"] is None:
                by_key.setdefault((str(new["tenant"]), str(new["ordering_key"])), []).append(new)
        for (tenant, key), keyed in sorted(by_key.items()):  # one lock order: two inserts cannot deadlock
            first = await self.take_places(tenant, key, len(keyed))
            for offset, new in enumerate(keyed):
                new["ordering_seq"] = first + offset
        await self.session.execute(JOBS_INSERT, row_values)

    async def take_places(self, tenant: str, ordering_key: str, count: int) -> int:
        """The first of `count` new places on an ordering key. The key's sequence row stays locked until this
        transaction ends: whoever takes the next place waits for our commit, so a job with a lower place has
        always committed before a higher one is even numbered (the order is the commit order).

        On MySQL a key with no row yet gets it committed on its own first (INSERT IGNORE in autocommit), and
        only then is it bumped in this transaction: a first insert of a key that rolls back must not leave the
        submits queued behind its uncommitted row to deadlock on the gap it leaves."""
        if self.session.get_bind().dialect.name == "sqlite":  # one writer at a time: no gap to deadlock on
            place = {"tenant": tenant, "ordering_key": ordering_key, "last_seq": count}
            sqlite_stmt = sqlite_insert(SEQUENCES).values(place)
            upsert = sqlite_stmt.on_conflict_do_update(
                index_elements=[sequence.tenant, sequence.ordering_key],
                set_={"last_seq": sequence.last_seq + sqlite_stmt.excluded.last_seq},
            )
            await self.session.execute(upsert)
        else:
            bump = (
                SEQUENCES.update()
                .where(sequence.tenant == tenant, sequence.ordering_key == ordering_key)
                .values(last_seq=sequence.last_seq + count)
            )
            # Only a key with no row yet creates it on the side: one this transaction already bumped (a
            # catch-up adding several jobs of a key) is locked by it: a second connection would wait on it.
            if await self.rowcount(bump) == 0:
                async with driver_autocommit() as tx:
                    new_key = {"tenant": tenant, "ordering_key": ordering_key, "last_seq": 0}
                    await tx.insert_many(_SEQUENCE_CREATE, [new_key])
                await self.session.execute(bump)
        mine = and_(sequence.tenant == tenant, sequence.ordering_key == ordering_key)
        last = await self.first(select(sequence.last_seq).where(mine), int)
        assert last is not None
        return int(last) - count + 1

    async def get_job(self, job_id: str, scope: TenantScope) -> ReportJob | None:
        # populate_existing: a caller that just ran a guarded UPDATE must see the row as it is now.
        stmt = select(ReportJob).where(job.id == job_id).execution_options(populate_existing=True)
        if scope.tenant is not None:
            stmt = stmt.where(job.tenant == scope.tenant)
        return await self.first(stmt, ReportJob)

    async def get_job_by_idempotency_key(self, tenant: str, key: str) -> ReportJob | None:
        stmt = select(ReportJob).where(job.tenant == tenant, job.idempotency_key == key)
        return await self.first(stmt, ReportJob)

    async def get_jobs_by_idempotency_keys(self, tenant: str, keys: Sequence[str]) -> dict[str, ReportJob]:
        """The tenant's jobs holding any of `keys`, by key."""
        if not keys:
            return {}
        stmt = select(ReportJob).where(job.tenant == tenant, job.idempotency_key.in_(sorted(set(keys))))
        return {row.idempotency_key or "": row for row in await self.all(stmt, ReportJob)}

    async def count_jobs(self, scope: TenantScope) -> int:
        stmt = select(func.count()).select_from(JOBS)
        if scope.tenant is not None:
            stmt = stmt.where(job.tenant == scope.tenant)
        return int((await self.session.execute(stmt)).scalar_one())

    async def cancel_waiting(self, row: ReportJob, now: datetime) -> int:
        """pending/scheduled/retrying → cancelled, only if nothing changed since `row` was read."""
        return await self.guarded_update(
            JOBS,
            [
                job.id == row.id,
                job.status == row.status.value,
                job.attempt == row.attempt,
                job.replay_count == row.replay_count,
                job.status.in_(values(WAITING)),
            ],
            {
                "status": JobStatus.CANCELLED.value,
                "cancel_requested": True,
                "cancel_requested_at": now,
                "finished_at": now,
                "next_attempt_at": None,
                "updated_at": now,
            },
            from_statuses=WAITING,
        )

    async def request_cancel(self, key: AttemptKey, now: datetime) -> int:
        """Flag a running attempt to stop: its next heartbeat sees the flag and cancels the report. A second
        request keeps the first one's time."""
        return await self.guarded_update(
            JOBS,
            [
                job.id == key.job_id,
                job.status == JobStatus.RUNNING.value,
                job.attempt == key.attempt,
                job.replay_count == key.replay,
            ],
            {
                "cancel_requested": True,
                "cancel_requested_at": func.coalesce(job.cancel_requested_at, now),
                "updated_at": now,
            },
            from_statuses={JobStatus.RUNNING},
        )

    async def note_cancel_request(self, key: AttemptKey, now: datetime) -> int:
        """Record on the running attempt's row that a cancel was asked during it (first request's time), so
        that its outcome later tells a cancelled run from one that finished first."""
        stmt = (
            ATTEMPTS.update()
            .where(
                attempt.job_id == key.job_id,
                attempt.replay == key.replay,
                attempt.attempt == key.attempt,
                attempt.outcome == AttemptOutcome.RUNNING.value,
            )
            .values(cancel_requested_at=func.coalesce(attempt.cancel_requested_at, now))
        )
        return await self.rowcount(stmt)

    async def replay(self, row: ReportJob, now: datetime) -> int:
        """dead/cancelled → pending with the attempt counter reset and replay_count + 1."""
        return await self.guarded_update(
            JOBS,
            [
                job.id == row.id,
                job.status == row.status.value,
                job.replay_count == row.replay_count,
                job.status.in_(values(REPLAYABLE)),
            ],
            {
                "status": JobStatus.PENDING.value,
                "attempt": 0,
                "replay_count": job.replay_count + 1,
                "next_attempt_at": None,
                "finished_at": None,
                "heartbeat_at": None,
                "cancel_requested": False,
                "cancel_requested_at": None,
                "progress": None,
                "blocked_by": None,
                # A replayed job blocks its ordering key again while it runs (and if it dies again).
                "resolved_at": None,
                # Output columns stay: a multi-step job keeps the file an earlier attempt's step produced.
                "updated_at": now,
            },
            from_statuses=REPLAYABLE,
        )

    async def mark_resolved(self, row: ReportJob, now: datetime) -> int:
        """A dead job whose letter an operator resolved by hand stops blocking its ordering key; only while it
        is still the dead job `row` read (not replayed since) and unresolved. The status stays `dead`."""
        return await self.guarded_update(
            JOBS,
            [
                job.id == row.id,
                job.status == JobStatus.DEAD.value,
                job.replay_count == row.replay_count,
                job.resolved_at.is_(None),
            ],
            {"resolved_at": now, "updated_at": now},
            from_statuses={JobStatus.DEAD},
        )

    # ---- ordering keys ----------------------------------------------------------------------------

    async def ordering_blocker(self, row: ReportJob) -> str | None:
        """The nearest job before `row` on its key that must finish first (`ordering_blocker_query`)."""
        stmt, params = ordering_blocker_query(row)
        return await self.first(stmt.params(params), str)

    async def set_blocked_by(self, job_id: str, blocker: str | None) -> None:
        await self.session.execute(SET_BLOCKED_BY, {"p_id": job_id, "p_blocker": blocker})

    async def next_in_order(self, tenant: str, ordering_key: str) -> ReportJob | None:
        """The earliest pending job of an ordering key: the one to wake when its predecessor finishes."""
        stmt = (
            select(ReportJob)
            .where(
                job.tenant == tenant,
                job.ordering_key == ordering_key,
                job.status == JobStatus.PENDING.value,
            )
            .order_by(job.ordering_seq)
            .limit(1)
        )
        return await self.first(stmt, ReportJob)


def _ordering_blocker(past_dead: bool) -> Select[tuple[str]]:
    # One bound value per status, not an expanding IN: the driver path (app.core.driver) runs it as compiled.
    unfinished = [literal(status) for status in sorted(values(WAITING | {JobStatus.RUNNING}))]
    blocks: ColumnElement[bool] = job.status.in_(unfinished)
    if not past_dead:
        blocks = or_(blocks, and_(job.status == JobStatus.DEAD.value, job.resolved_at.is_(None)))
    # A running job of the key blocks whatever its place: a predecessor replayed while its successor runs
    # waits for it, never runs beside it.
    running = and_(job.status == JobStatus.RUNNING.value, job.id != bindparam("p_id"))
    return (
        select(job.id)
        .where(
            job.tenant == bindparam("p_tenant"),
            job.ordering_key == bindparam("p_key"),
            or_(and_(job.ordering_seq < bindparam("p_seq"), blocks), running),
        )
        .order_by(job.ordering_seq.desc())
        .limit(1)
    )


# Built once (the driver compiles a statement once per object): a job that waits on a dead predecessor, and
# one that runs past dead ones.
_ORDERING_BLOCKER = {False: _ordering_blocker(False), True: _ordering_blocker(True)}
SET_BLOCKED_BY = JOBS.update().where(job.id == bindparam("p_id")).values(blocked_by=bindparam("p_blocker"))


def ordering_blocker_query(row: ReportJob) -> tuple[Select[tuple[str]], dict[str, Any]]:
    """The id of the nearest job placed before `row` on the same (tenant, ordering_key) that must finish first
    (any unfinished one, or a dead one not resolved by hand, unless `row` runs past dead ones) or any other
    running job of the key, and its parameters. The nearest, not the first: recorded as `blocked_by`, it is
    what the reconciliation asks about, and a predecessor's finish then frees one successor's record, not
    the whole backlog's (app/maintenance/reconcile.py). Places follow commit order
    (`JobRepository.take_places`): a predecessor that committed late is never missed."""
    params = {"p_tenant": row.tenant, "p_key": row.ordering_key, "p_seq": row.ordering_seq, "p_id": row.id}
    return _ORDERING_BLOCKER[row.on_predecessor_dead == "continue"], params
