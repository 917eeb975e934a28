"""Every SQL statement of the project, behind one object per session.

State changes are guarded UPDATEs (compare-and-set on status + attempt + replay_count) so a duplicate
delivery or a stale attempt changes nothing; callers look at the returned row count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, delete, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import ColumnElement

from app.models import AlertDelivery, ApiKey, CallbackDelivery, DeadLetter, JobAttempt, JobStep, ReportJob
from app.states import (
    REPLAYABLE,
    TERMINAL,
    WAITING,
    AlertStatus,
    AttemptOutcome,
    CallbackStatus,
    JobStatus,
    StepStatus,
    values,
)

# Core tables for UPDATE/DELETE: no ORM session synchronisation, the row counts are what matter.
JOBS = ReportJob.__table__  # type: ignore[attr-defined]
ATTEMPTS = JobAttempt.__table__  # type: ignore[attr-defined]
LETTERS = DeadLetter.__table__  # type: ignore[attr-defined]
KEYS = ApiKey.__table__  # type: ignore[attr-defined]
DELIVERIES = CallbackDelivery.__table__  # type: ignore[attr-defined]
STEPS = JobStep.__table__  # type: ignore[attr-defined]
ALERT_DELIVERIES = AlertDelivery.__table__  # type: ignore[attr-defined]
J = JOBS.c
A = ATTEMPTS.c
D = LETTERS.c
K = KEYS.c
C = DELIVERIES.c
S = STEPS.c
AD = ALERT_DELIVERIES.c


# Values go in as execution parameters, so SQLAlchemy compiles each INSERT once per process.
JOBS_INSERT = insert(JOBS)
ATTEMPTS_INSERT = insert(ATTEMPTS)


def _row(table: Any, obj: Any) -> dict[str, Any]:
    """Column values of a model instance for a Core INSERT (an unset autoincrement key is left out)."""
    values = {c.name: getattr(obj, c.name) for c in table.columns}
    return {k: v for k, v in values.items() if v is not None or not table.c[k].primary_key}


@dataclass(frozen=True)
class JobFilter:
    tenant: str | None
    statuses: Sequence[JobStatus] = ()
    report_type: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None


@dataclass(frozen=True)
class LetterFilter:
    tenant: str | None
    include_archived: bool = False
    report_type: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    job_ids: Sequence[str] = ()
    unreplayed_only: bool = False
    now: datetime | None = None


@dataclass(frozen=True)
class AttemptKey:
    """Identifies one attempt of one job: the CAS guard of every state change an attempt makes."""

    job_id: str
    attempt: int
    replay: int
    # False when the job has neither a callback_url nor an ordering_key (both fixed at submit): its terminal
    # transition then has no side effects to stage, which saves a read on the hot path.
    has_effects: bool = field(default=True, compare=False)


class Repository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def _rowcount(self, stmt: Any) -> int:
        """Rows a guarded UPDATE/DELETE touched: 0 means the compare-and-set lost."""
        return int((await self.session.execute(stmt)).rowcount)  # type: ignore[attr-defined]

    # ---- jobs ---------------------------------------------------------------------------------

    async def add_job(self, job: ReportJob) -> None:
        # A Core INSERT: the ORM unit of work costs more than the statement on this hot path.
        await self.session.execute(JOBS_INSERT, _row(JOBS, job))

    async def get_job(
        self, job_id: str, tenant: str | None = None, for_update: bool = False
    ) -> ReportJob | None:
        # populate_existing: a caller that just ran a guarded UPDATE must see the row as it is now.
        stmt = select(ReportJob).where(J.id == job_id).execution_options(populate_existing=True)
        if tenant is not None:
            stmt = stmt.where(J.tenant == tenant)
        if for_update:
            stmt = stmt.with_for_update()
        return (await self.session.execute(stmt)).scalars().first()

    async def get_job_by_idempotency_key(self, tenant: str, key: str) -> ReportJob | None:
        stmt = select(ReportJob).where(J.tenant == tenant, J.idempotency_key == key)
        return (await self.session.execute(stmt)).scalars().first()

    async def list_jobs(self, flt: JobFilter, before_id: str | None, limit: int) -> list[ReportJob]:
        """Newest first by id (ULIDs sort by creation time); `before_id` is the keyset cursor."""
        stmt = select(ReportJob)
        conds: list[ColumnElement[bool]] = []
        if flt.tenant is not None:
            conds.append(J.tenant == flt.tenant)
        if flt.statuses:
            conds.append(J.status.in_([s.value for s in flt.statuses]))
        if flt.report_type:
            conds.append(J.report_type == flt.report_type)
        if flt.created_after:
            conds.append(J.created_at >= flt.created_after)
        if flt.created_before:
            conds.append(J.created_at < flt.created_before)
        if before_id:
            conds.append(J.id < before_id)
        stmt = stmt.where(and_(*conds)) if conds else stmt
        stmt = stmt.order_by(J.id.desc()).limit(limit)
        return list((await self.session.execute(stmt)).scalars().all())

    async def cas_start_attempt(self, job: ReportJob, now: datetime, worker: str) -> int:
        """Move a startable job to running as attempt + 1; 0 rows means someone else won."""
        stmt = (
            update(JOBS)
            .where(
                J.id == job.id,
                J.status == job.status.value,
                J.attempt == job.attempt,
                J.replay_count == job.replay_count,
            )
            .values(
                status=JobStatus.RUNNING.value,
                attempt=J.attempt + 1,
                attempts_total=J.attempts_total + 1,
                heartbeat_at=now,
                started_at=now,
                next_attempt_at=None,
                worker=worker,
                updated_at=now,
            )
        )
        return await self._rowcount(stmt)

    async def cas_running(self, key: AttemptKey, values: dict[str, Any]) -> int:
        """Update a job only if `key` is still its running attempt."""
        stmt = (
            update(JOBS)
            .where(
                J.id == key.job_id,
                J.status == JobStatus.RUNNING.value,
                J.attempt == key.attempt,
                J.replay_count == key.replay,
            )
            .values(**values)
        )
        return await self._rowcount(stmt)

    async def get_running_flags(self, key: AttemptKey) -> tuple[bool, bool] | None:
        """(is still this attempt's, cancel_requested) for the heartbeat."""
        stmt = select(J.status, J.attempt, J.replay_count, J.cancel_requested).where(J.id == key.job_id)
        row = (await self.session.execute(stmt)).first()
        if row is None:
            return None
        mine = (
            row.status == JobStatus.RUNNING.value
            and row.attempt == key.attempt
            and row.replay_count == key.replay
        )
        return mine, bool(row.cancel_requested)

    async def jobs_due_for_enqueue(self, now: datetime, older_than: datetime, limit: int) -> list[ReportJob]:
        """Jobs MySQL says should be in the queue: pending, retrying past backoff, scheduled past run_at."""
        stmt = (
            select(ReportJob)
            .where(
                or_(
                    and_(J.status == JobStatus.PENDING.value, J.updated_at <= older_than),
                    and_(J.status == JobStatus.RETRYING.value, J.next_attempt_at <= now),
                    and_(J.status == JobStatus.SCHEDULED.value, J.run_at <= now),
                )
            )
            .order_by(J.id)
            .limit(limit)
        )
        return list((await self.session.execute(stmt)).scalars().all())

    async def decrement_attempts_total(self, job_id: str) -> None:
        await self.session.execute(
            update(JOBS).where(J.id == job_id).values(attempts_total=J.attempts_total - 1)
        )

    async def stuck_jobs(self, heartbeat_before: datetime, limit: int) -> list[ReportJob]:
        stmt = (
            select(ReportJob)
            .where(J.status == JobStatus.RUNNING.value, J.heartbeat_at < heartbeat_before)
            .order_by(J.heartbeat_at)
            .limit(limit)
        )
        return list((await self.session.execute(stmt)).scalars().all())

    async def cas_cancel_waiting(self, job: ReportJob, now: datetime) -> int:
        """pending/scheduled/retrying → cancelled, only if nothing changed since `job` was read."""
        stmt = (
            update(JOBS)
            .where(
                J.id == job.id,
                J.status == job.status.value,
                J.attempt == job.attempt,
                J.replay_count == job.replay_count,
                J.status.in_(values(WAITING)),
            )
            .values(status=JobStatus.CANCELLED.value, finished_at=now, next_attempt_at=None, updated_at=now)
        )
        return await self._rowcount(stmt)

    async def note_late_result(self, key: AttemptKey, outcome: str, now: datetime) -> int:
        """Record on an attempt already declared lost that its worker reported late (and was ignored)."""
        stmt = (
            update(ATTEMPTS)
            .where(
                A.job_id == key.job_id,
                A.attempt == key.attempt,
                A.replay == key.replay,
                A.outcome == AttemptOutcome.LOST.value,
            )
            .values(
                error={
                    "type": "LostWorker",
                    "retryable": True,
                    "message": f"no heartbeat; the worker's late result ({outcome}) at "
                    f"{now.isoformat()} was discarded",
                }
            )
        )
        return await self._rowcount(stmt)

    # ---- ordering keys ----------------------------------------------------------------------------

    async def ordering_blocker(self, job: ReportJob) -> str | None:
        """The earliest job submitted before `job` under the same (tenant, ordering_key) that must finish
        first: any unfinished one, or a dead one unless `job` continues past dead predecessors."""
        blocking = WAITING | {JobStatus.RUNNING}
        if job.on_predecessor_dead != "continue":
            blocking |= {JobStatus.DEAD}
        stmt = (
            select(J.id)
            .where(
                J.tenant == job.tenant,
                J.ordering_key == job.ordering_key,
                or_(J.created_at < job.created_at, and_(J.created_at == job.created_at, J.id < job.id)),
                J.status.in_(values(blocking)),
            )
            .order_by(J.created_at, J.id)
            .limit(1)
        )
        return (await self.session.execute(stmt)).scalars().first()

    async def set_blocked_by(self, job_id: str, blocker: str | None) -> None:
        await self.session.execute(update(JOBS).where(J.id == job_id).values(blocked_by=blocker))

    async def next_in_order(self, tenant: str, ordering_key: str) -> ReportJob | None:
        """The earliest pending job of an ordering key: the one to wake when its predecessor finishes."""
        stmt = (
            select(ReportJob)
            .where(J.tenant == tenant, J.ordering_key == ordering_key, J.status == JobStatus.PENDING.value)
            .order_by(J.created_at, J.id)
            .limit(1)
        )
        return (await self.session.execute(stmt)).scalars().first()

    async def count_waiting_successors(self, job: ReportJob) -> int:
        stmt = (
            select(func.count())
            .select_from(JOBS)
            .where(
                J.tenant == job.tenant,
                J.ordering_key == job.ordering_key,
                J.created_at > job.created_at,
                J.on_predecessor_dead == "wait",
                J.status.in_(values(WAITING)),
            )
        )
        return int((await self.session.execute(stmt)).scalar_one())

    async def waiting_successors(self, job_ids: set[str]) -> dict[str, tuple[str, int]]:
        """For dead jobs with an ordering key: (key, how many later jobs of it wait for them)."""
        if not job_ids:
            return {}
        stmt = select(ReportJob).where(J.id.in_(list(job_ids)), J.ordering_key.is_not(None))
        out: dict[str, tuple[str, int]] = {}
        for job in (await self.session.execute(stmt)).scalars().all():
            assert job.ordering_key is not None
            out[job.id] = (job.ordering_key, await self.count_waiting_successors(job))
        return out

    # ---- steps ------------------------------------------------------------------------------------

    async def list_steps(self, job_id: str) -> list[JobStep]:
        stmt = (
            select(JobStep)
            .where(S.job_id == job_id)
            .order_by(S.position)
            .execution_options(populate_existing=True)
        )
        return list((await self.session.execute(stmt)).scalars().all())

    async def add_steps(self, steps: Sequence[JobStep]) -> None:
        self.session.add_all(list(steps))
        await self.session.flush()

    async def update_step(self, job_id: str, name: str, values: dict[str, Any]) -> int:
        stmt = update(STEPS).where(S.job_id == job_id, S.name == name).values(**values)
        return await self._rowcount(stmt)

    async def reset_steps_for_replay(self, job_id: str, names: Sequence[str] | None) -> int:
        """Named steps (or every failed one) go back to pending and may run once more, manual ones too."""
        conds = [S.job_id == job_id, S.status != StepStatus.SUCCEEDED.value]
        if names is None:
            conds.append(S.status.in_([StepStatus.FAILED.value, StepStatus.RUNNING.value]))
        else:
            conds.append(S.name.in_(list(names)))
        stmt = update(STEPS).where(*conds).values(status=StepStatus.PENDING.value, rerun_allowed=True)
        return await self._rowcount(stmt)

    # ---- attempts -----------------------------------------------------------------------------

    async def add_attempt(self, attempt: JobAttempt) -> None:
        await self.session.execute(ATTEMPTS_INSERT, _row(ATTEMPTS, attempt))

    async def finish_attempt_row(
        self, key: AttemptKey, outcome: AttemptOutcome, now: datetime, error: dict[str, Any] | None
    ) -> int:
        stmt = (
            update(ATTEMPTS)
            .where(
                A.job_id == key.job_id,
                A.attempt == key.attempt,
                A.replay == key.replay,
                A.outcome == AttemptOutcome.RUNNING.value,
            )
            .values(outcome=outcome.value, finished_at=now, error=error)
        )
        return await self._rowcount(stmt)

    async def list_attempts(self, job_id: str) -> list[JobAttempt]:
        stmt = select(JobAttempt).where(A.job_id == job_id).order_by(A.replay, A.attempt)
        return list((await self.session.execute(stmt)).scalars().all())

    # ---- dead letters -------------------------------------------------------------------------

    async def add_dead_letter(self, letter: DeadLetter) -> None:
        self.session.add(letter)
        await self.session.flush()

    async def letters_missing_delivery(self, sink: str, limit: int) -> list[str]:
        """Pending letters (oldest first) that have no delivery row for `sink` yet."""
        has_row = select(AD.id).where(AD.letter_id == D.id, AD.sink == sink).exists()
        stmt = (
            select(D.id)
            .where(D.alert_status == AlertStatus.PENDING.value, ~has_row)
            .order_by(D.created_at, D.id)
            .limit(limit)
        )
        return list((await self.session.execute(stmt)).scalars().all())

    async def add_alert_deliveries(self, sink: str, letter_ids: Sequence[str], now: datetime) -> None:
        if letter_ids:
            rows = [
                {"letter_id": i, "sink": sink, "status": AlertStatus.PENDING, "created_at": now}
                for i in letter_ids
            ]
            await self.session.execute(insert(ALERT_DELIVERIES), rows)

    async def due_alert_deliveries(
        self, sink: str, now: datetime, limit: int
    ) -> list[tuple[AlertDelivery, DeadLetter]]:
        """A sink's due pending deliveries with their (still pending) letters, oldest letter first."""
        stmt = (
            select(AlertDelivery, DeadLetter)
            .join(DeadLetter, AD.letter_id == D.id)
            .where(
                AD.sink == sink,
                AD.status == AlertStatus.PENDING.value,
                or_(AD.next_attempt_at.is_(None), AD.next_attempt_at <= now),
                D.alert_status == AlertStatus.PENDING.value,
            )
            .order_by(D.created_at, D.id)
            .limit(limit)
        )
        return [(row[0], row[1]) for row in (await self.session.execute(stmt)).all()]

    async def alert_messages_since(self, sink: str, since: datetime) -> tuple[int, datetime | None]:
        """How many distinct messages `sink` accepted since `since`, and when the oldest of them went."""
        stmt = select(func.count(func.distinct(AD.message_id)), func.min(AD.sent_at)).where(
            AD.sink == sink, AD.sent_at >= since, AD.message_id.is_not(None)
        )
        count, oldest = (await self.session.execute(stmt)).one()
        if oldest is not None and oldest.tzinfo is None:
            oldest = oldest.replace(tzinfo=UTC)
        return int(count or 0), oldest

    async def mark_deliveries_sent(
        self, sink: str, letter_ids: Sequence[str], message_id: str, now: datetime
    ) -> int:
        stmt = (
            update(ALERT_DELIVERIES)
            .where(
                AD.letter_id.in_(list(letter_ids)), AD.sink == sink, AD.status == AlertStatus.PENDING.value
            )
            .values(
                status=AlertStatus.SENT.value,
                sent_at=now,
                message_id=message_id,
                attempts=AD.attempts + 1,
                next_attempt_at=None,
                last_error=None,
            )
        )
        return await self._rowcount(stmt)

    async def mark_deliveries_failed(
        self, sink: str, letter_ids: Sequence[str], next_at: datetime, error: str
    ) -> int:
        stmt = (
            update(ALERT_DELIVERIES)
            .where(
                AD.letter_id.in_(list(letter_ids)), AD.sink == sink, AD.status == AlertStatus.PENDING.value
            )
            .values(attempts=AD.attempts + 1, next_attempt_at=next_at, last_error=error[:500])
        )
        return await self._rowcount(stmt)

    async def letters_alerted_by_all(
        self, sinks: Sequence[str], letter_ids: Sequence[str] | None, limit: int
    ) -> list[str]:
        """Pending letters that every one of `sinks` has accepted a message for."""
        names = sorted(set(sinks))
        accepted = (
            select(func.count(AD.id))
            .where(AD.letter_id == D.id, AD.sink.in_(names), AD.status == AlertStatus.SENT.value)
            .correlate(LETTERS)
            .scalar_subquery()
        )
        stmt = select(D.id).where(D.alert_status == AlertStatus.PENDING.value, accepted == len(names))
        if letter_ids is not None:
            stmt = stmt.where(D.id.in_(list(letter_ids)))
        return list((await self.session.execute(stmt.limit(limit))).scalars().all())

    async def alert_deliveries_of(
        self, letter_ids: Sequence[str], sinks: Sequence[str]
    ) -> list[AlertDelivery]:
        stmt = select(AlertDelivery).where(AD.letter_id.in_(list(letter_ids)), AD.sink.in_(list(sinks)))
        return list((await self.session.execute(stmt)).scalars().all())

    async def update_pending_letters(self, letter_ids: Sequence[str], values: dict[str, Any]) -> int:
        """Set pending letters' alert summary (status, sent_at, attempts, next try, last error)."""
        stmt = (
            update(LETTERS)
            .where(D.id.in_(list(letter_ids)), D.alert_status == AlertStatus.PENDING.value)
            .values(**values)
        )
        return await self._rowcount(stmt)

    async def letters_to_republish(self, now: datetime, created_before: datetime, limit: int) -> list[str]:
        stmt = (
            select(D.id)
            .where(
                D.alert_status == AlertStatus.PENDING.value,
                D.created_at <= created_before,
                or_(D.alert_next_at.is_(None), D.alert_next_at <= now),
            )
            .order_by(D.created_at)
            .limit(limit)
        )
        return list((await self.session.execute(stmt)).scalars().all())

    async def archive_expired_letters(self, now: datetime) -> int:
        stmt = update(LETTERS).where(D.archived_at.is_(None), D.expire_at <= now).values(archived_at=now)
        return await self._rowcount(stmt)

    async def purge_archived_letters(self, archived_before: datetime) -> int:
        stmt = delete(LETTERS).where(D.archived_at.is_not(None), D.archived_at <= archived_before)
        return await self._rowcount(stmt)

    async def list_dead_letters(
        self, flt: LetterFilter, before_id: str | None, limit: int
    ) -> list[DeadLetter]:
        conds: list[ColumnElement[bool]] = []
        if flt.tenant is not None:
            conds.append(D.tenant == flt.tenant)
        if not flt.include_archived:
            conds.append(D.archived_at.is_(None))
            conds.append(D.expire_at > (flt.now or datetime.now(UTC)))
        if flt.report_type:
            conds.append(D.report_type == flt.report_type)
        if flt.created_after:
            conds.append(D.created_at >= flt.created_after)
        if flt.created_before:
            conds.append(D.created_at < flt.created_before)
        if flt.job_ids:
            conds.append(D.job_id.in_(list(flt.job_ids)))
        if flt.unreplayed_only:
            conds.append(D.replayed_at.is_(None))
        if before_id:
            conds.append(D.id < before_id)
        stmt = select(DeadLetter)
        if conds:
            stmt = stmt.where(and_(*conds))
        stmt = stmt.order_by(D.id.desc()).limit(limit)
        return list((await self.session.execute(stmt)).scalars().all())

    async def mark_letters_replayed(self, job_id: str, now: datetime) -> int:
        stmt = update(LETTERS).where(D.job_id == job_id, D.replayed_at.is_(None)).values(replayed_at=now)
        return await self._rowcount(stmt)

    async def cas_replay(self, job: ReportJob, now: datetime) -> int:
        """dead/cancelled → pending with the attempt counter reset and replay_count + 1."""
        stmt = (
            update(JOBS)
            .where(
                J.id == job.id,
                J.status == job.status.value,
                J.replay_count == job.replay_count,
                J.status.in_(values(REPLAYABLE)),
            )
            .values(
                status=JobStatus.PENDING.value,
                attempt=0,
                replay_count=J.replay_count + 1,
                next_attempt_at=None,
                finished_at=None,
                heartbeat_at=None,
                cancel_requested=False,
                progress=None,
                blocked_by=None,
                # Output columns stay: a multi-step job keeps the file an earlier attempt's step produced.
                updated_at=now,
            )
        )
        return await self._rowcount(stmt)

    # ---- completion callbacks ---------------------------------------------------------------------

    async def add_delivery(self, delivery: CallbackDelivery) -> None:
        self.session.add(delivery)
        await self.session.flush()
        await self.session.execute(
            update(JOBS)
            .where(J.id == delivery.job_id)
            .values(
                callback_status=CallbackStatus.PENDING.value, callback_attempts=0, callback_last_error=None
            )
        )

    async def get_delivery(self, delivery_id: str) -> CallbackDelivery | None:
        stmt = select(CallbackDelivery).where(C.id == delivery_id).execution_options(populate_existing=True)
        return (await self.session.execute(stmt)).scalars().first()

    async def record_delivery(
        self,
        row: CallbackDelivery,
        status: CallbackStatus,
        attempts: int,
        error: str | None,
        next_at: datetime | None,
        delivered_at: datetime | None,
    ) -> int:
        """CAS on the attempt count, so two deliverers of one row cannot both count an attempt."""
        values: dict[str, Any] = {
            "status": status.value,
            "attempts": attempts,
            "last_error": error,
            "delivered_at": delivered_at,
        }
        if next_at is not None:
            values["next_attempt_at"] = next_at
        stmt = (
            update(DELIVERIES)
            .where(C.id == row.id, C.attempts == row.attempts, C.status == CallbackStatus.PENDING.value)
            .values(**values)
        )
        changed = await self._rowcount(stmt)
        if changed:
            await self.session.execute(
                update(JOBS)
                .where(J.id == row.job_id)
                .values(
                    callback_status=status.value,
                    callback_attempts=attempts,
                    callback_last_error=error[:500] if error else None,
                )
            )
        return changed

    async def due_delivery_ids(self, now: datetime, limit: int) -> list[str]:
        stmt = (
            select(C.id)
            .where(C.status == CallbackStatus.PENDING.value, C.next_attempt_at <= now)
            .order_by(C.next_attempt_at)
            .limit(limit)
        )
        return list((await self.session.execute(stmt)).scalars().all())

    # ---- api keys -----------------------------------------------------------------------------

    async def add_api_key(self, key: ApiKey) -> None:
        self.session.add(key)
        await self.session.flush()

    async def get_api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        stmt = select(ApiKey).where(K.key_hash == key_hash)
        return (await self.session.execute(stmt)).scalars().first()

    async def list_api_keys(self, tenant: str | None) -> list[ApiKey]:
        stmt = select(ApiKey).order_by(K.created_at)
        if tenant is not None:
            stmt = stmt.where(K.tenant == tenant)
        return list((await self.session.execute(stmt)).scalars().all())

    async def revoke_api_key(self, key_id_or_prefix: str, now: datetime) -> int:
        stmt = (
            update(KEYS)
            .where(or_(K.id == key_id_or_prefix, K.prefix == key_id_or_prefix), K.revoked_at.is_(None))
            .values(revoked_at=now)
        )
        return await self._rowcount(stmt)

    # ---- health -------------------------------------------------------------------------------

    async def ping(self) -> None:
        await self.session.execute(select(1))

    async def count_jobs(self, tenant: str | None = None) -> int:
        stmt = select(func.count()).select_from(ReportJob)
        if tenant is not None:
            stmt = stmt.where(J.tenant == tenant)
        return int((await self.session.execute(stmt)).scalar_one())

    async def expired_job_ids(
        self, finished_before: datetime, idempotent_before: datetime, limit: int
    ) -> list[str]:
        """Finished jobs past retention. A job stays while any dead letter names it (the archive keeps its
        history), and a job holding an Idempotency-Key stays at least until the key's TTL is over."""
        has_letter = select(D.id).where(D.job_id == J.id).exists()
        stmt = (
            select(J.id)
            .where(
                J.finished_at < finished_before,
                or_(J.idempotency_key.is_(None), J.created_at < idempotent_before),
                J.status.in_(values(TERMINAL)),
                ~has_letter,
            )
            .limit(limit)
        )
        return list((await self.session.execute(stmt)).scalars().all())

    async def delete_jobs(self, job_ids: Sequence[str]) -> int:
        ids = list(job_ids)
        await self.session.execute(delete(ATTEMPTS).where(A.job_id.in_(ids)))
        await self.session.execute(delete(DELIVERIES).where(C.job_id.in_(ids)))
        await self.session.execute(delete(STEPS).where(S.job_id.in_(ids)))
        stmt = delete(JOBS).where(J.id.in_(ids))
        return await self._rowcount(stmt)
