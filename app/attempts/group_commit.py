"""Group commit of a worker's starts and successes: concurrent attempts in one process share a transaction
(one locking read, one UPDATE, one multi-row INSERT, one commit), and each job is still decided alone.

The rows are read `FOR UPDATE`, each job is checked as `service.start_attempt` checks it, and the UPDATE
carries every job's own compare-and-set; a job that loses is answered Skip (or False) and its neighbours
commit. Anything unexpected (a count that does not add up, a deadlock, a bug) sends the batch back through
the one-job path, job by job, so an error only ever fails its own job. A connection lost is raised to all.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from functools import cache
from typing import Any, TypeVar

from app.attempts import service
from app.attempts.group_repository import GroupRepository
from app.core import failpoints
from app.core.config import get_settings
from app.core.db import is_db_outage, is_lock_conflict, outage_retrying, session_scope
from app.core.driver import SessionStatements, Statements, driver_path_enabled, driver_transaction
from app.core.grouping import GroupCommit
from app.core.states import AttemptKey, AttemptOutcome
from app.core.times import utcnow
from app.destinations import slow_routes
from app.jobs.effects import TerminalEffects
from app.models import ReportJob
from app.reports.base import OutputInfo

log = logging.getLogger(__name__)

Decision = service.Started | service.NotDue | service.Skip | service.Blocked
StartItem = tuple[str, str]  # (job id, worker name)
DoneItem = tuple[AttemptKey, OutputInfo | None]
T = TypeVar("T")
R = TypeVar("R")
# How long a finished attempt keeps trying to record its outcome while MySQL is unreachable (the runner),
# and a batch whose commit answered with an error keeps asking whether it landed.
RECORD_OUTCOME_FOR_S = 120.0


class _Recheck(Exception):
    """The shared statement did not change the rows it was meant to: decide these jobs one by one."""


async def start_attempt(job_id: str, worker: str) -> Decision:
    """`service.start_attempt`, sharing its transaction with the starts that arrive at the same time."""
    return await _starts().submit((job_id, worker))


async def complete_attempt(key: AttemptKey, output: OutputInfo | None) -> bool:
    """`service.complete_attempt`, sharing its transaction with the successes that arrive together."""
    return await _successes().submit((key, output))


def group_stats() -> dict[str, int]:
    """Batches and items flushed so far in this process (the profile and the tests read them)."""
    starts, successes = _starts(), _successes()
    return {
        "start_flushes": starts.flushes,
        "starts": starts.items,
        "success_flushes": successes.flushes,
        "successes": successes.items,
    }


@cache
def _starts() -> GroupCommit[StartItem, Decision]:
    return GroupCommit(_flush_starts, get_settings().worker_group_commit_max_jobs, _hand_back)


@cache
def _successes() -> GroupCommit[DoneItem, bool]:
    return GroupCommit(_flush_successes, get_settings().worker_group_commit_max_jobs)


def reset() -> None:
    """Forget the group committers (tests change the settings between cases)."""
    _starts.cache_clear()
    _successes.cache_clear()


@asynccontextmanager
async def batch_statements(session: bool = False) -> AsyncIterator[Statements]:
    """One transaction for a batch: the MySQL driver's own connection, or an ORM session's (SQLite, or a
    batch that stages effects through the jobs domain)."""
    if driver_path_enabled() and not session:
        async with driver_transaction() as tx:
            yield tx
    else:
        async with session_scope() as orm:
            yield SessionStatements(orm)


async def _hand_back(_item: StartItem, decision: Decision) -> None:
    """The caller was cancelled (worker shutdown) while its start was being committed: give the job back."""
    if isinstance(decision, service.Started):
        await service.release_attempt(decision.key)


# ---- starts ---------------------------------------------------------------------------------------------


async def _flush_starts(items: list[StartItem]) -> list[Decision | BaseException]:
    await slow_routes.refresh_if_stale()  # before any transaction: which jobs start with effects
    return await _together_or_alone(_start_together, items, lambda item: service.start_attempt(*item))


async def _start_together(items: list[StartItem]) -> list[Decision | BaseException]:
    """The whole batch in one transaction (the driver's on MySQL, a session's elsewhere): its starts commit
    or roll back together, so an error never leaves a job started that its caller was told was not. When the
    commit's answer is lost (the connection drops as it commits) the batch's own rows are read again: a start
    that landed is answered as started, so its delivery runs it."""
    decided: dict[int, Decision] = {}
    written: list[Started] = []  # set, with `decided`, once every row of the batch is written
    now = utcnow()
    try:
        async with batch_statements() as statements:
            decided, written, now = await _decide_starts(statements, items)
            await failpoints.hit("group_start.before_commit")
        await failpoints.hit("group_start.after_commit")
    except Exception:
        if not written or not await _landed(written, now):
            raise
        log.warning("a start batch's commit answered with an error but landed", extra={"jobs": len(items)})
    return _started(items, decided, written, now)


async def _landed(written: list[Started], now: datetime) -> bool:
    """Whether the batch that wrote these starts committed (all or none did), asked again until the database
    answers, for as long as an outcome is retried (`RECORD_OUTCOME_FOR_S`); raises if it never does."""
    keys = [key for _, _, key, _ in written]
    async for attempt in outage_retrying(RECORD_OUTCOME_FOR_S):
        with attempt:
            async with batch_statements() as statements:
                return bool(await GroupRepository(statements).started_at(keys, now))
    raise AssertionError("outage_retrying raises once it gives up")


Started = tuple[int, ReportJob, AttemptKey, dict[str, Any]]


async def _decide_starts(
    statements: Statements, items: list[StartItem]
) -> tuple[dict[int, Decision], list[Started], datetime]:
    """Lock the jobs, decide each (a job with an ordering key looks for its predecessors in the same
    transaction), start the winners in one compare-and-set UPDATE and one INSERT."""
    checked_at = utcnow()
    decisions: dict[int, Decision] = {}
    winners: list[tuple[int, ReportJob, str]] = []
    group = GroupRepository(statements)
    rows = await group.lock_jobs(sorted({job_id for job_id, _ in items}))
    seen: set[str] = set()
    for index, (job_id, worker) in enumerate(items):
        if job_id in seen:
            decisions[index] = service.Skip("another delivery started this job")
            continue
        seen.add(job_id)
        job = rows.get(job_id)
        refused = service.precheck(job, checked_at)
        if refused is not None:
            decisions[index] = refused
            continue
        assert job is not None
        if job.ordering_key:
            blocked = await service.blocker_of(group, job)
            if blocked is not None:
                decisions[index] = blocked
                continue
        winners.append((index, job, worker))
    # Stamped after every predecessor was seen finished (ordering keys: finished_at < started_at).
    now = utcnow()
    started: list[Started] = []
    if winners:
        if await group.start_many([(job, worker) for _, job, worker in winners], now) != len(winners):
            raise _Recheck("a start lost its compare-and-set under the lock")
        started = [(index, job, *service.new_attempt(job, now, worker)) for index, job, worker in winners]
        # The batch's attempts share `now`: their rows go in job-id (submission) order, so attempts started
        # in the same instant list oldest job first, whichever delivery reached the batch first.
        started.sort(key=lambda start: start[1].id)
        await group.add_attempts([row for *_, row in started])
    return decisions, started, now


def _started(
    items: list[StartItem], decisions: dict[int, Decision], started: list[Started], now: datetime
) -> list[Decision | BaseException]:
    """Once committed: the winners counted as started."""
    for index, job, key, _row in started:
        decisions[index] = service.mark_started(job, key, now)
    return [decisions[index] for index in range(len(items))]


# ---- successes ------------------------------------------------------------------------------------------


async def _flush_successes(items: list[DoneItem]) -> list[bool | BaseException]:
    return await _together_or_alone(_complete_together, items, lambda item: service.complete_attempt(*item))


async def _complete_together(items: list[DoneItem]) -> list[bool | BaseException]:
    """The whole batch in one transaction: the driver's on MySQL when no job has effects to stage (a callback
    or an ordering key: a query of the jobs domain), else a session's. A success that an earlier, failed
    try of the same attempt already committed (its answer was lost) is recognised and answered as ours."""
    keys = [key for key, _ in items]
    if len({key.job_id for key in keys}) != len(keys):
        raise _Recheck("one job twice in a batch")
    now = utcnow()
    effects: list[TerminalEffects] = []
    staged = not driver_path_enabled() or any(key.has_effects for key in keys)
    async with batch_statements(session=staged) as statements:
        won, earlier = await _complete_in(statements, items, now)
        if isinstance(statements, SessionStatements):
            effects = [await service.terminal_effects(statements.session, key) for key in won]
        await failpoints.hit("group_success.before_commit")
    mine = {key.job_id for key in [*won, *earlier]}
    for key in keys:
        if key.job_id in mine:
            service.after_done(key, now)
        else:
            log.warning("late success discarded", extra={"job_id": key.job_id, "attempt": key.attempt})
    for effect in effects:
        await effect.publish()
    return [key.job_id in mine for key in keys]


async def _complete_in(
    statements: Statements, items: list[DoneItem], now: datetime
) -> tuple[list[AttemptKey], list[AttemptKey]]:
    """Each still-running attempt's job to done in one compare-and-set UPDATE (one each for those with an
    output), then their attempt rows in one more. Returns the keys that won now, and those whose success an
    earlier try already committed. No locking read first: only when the UPDATE's count comes short are the
    jobs read back, in the same transaction: done at their attempt, and finished at `now` (won now) or
    before (won earlier: only this attempt's success moves its job to done at that attempt)."""
    group = GroupRepository(statements)
    plain = [key for key, output in items if output is None]
    changed = 0
    if plain:
        changed += await group.update_running_many(plain, service.done_values(now, None))
    for key, output in items:
        if output is not None:
            changed += await group.update_running_many([key], service.done_values(now, output))
    keys = [key for key, _ in items]
    won, earlier = keys, []
    if changed != len(keys):
        done = await group.done_at_attempt(keys)
        won = [key for key in keys if done.get(key.job_id) == now]
        earlier = [key for key in keys if key.job_id in done and done[key.job_id] != now]
    if won and await group.finish_attempts(won, AttemptOutcome.SUCCEEDED, now, None) != len(won):
        raise _Recheck("an attempt row did not match its job")
    return won, earlier


# ---- together, or else one by one ----------------------------------------------------------------------


async def _together_or_alone(
    together: Callable[[list[T]], Awaitable[list[R | BaseException]]],
    items: list[T],
    alone: Callable[[T], Awaitable[R]],
) -> list[R | BaseException]:
    try:
        return await together(items)
    except Exception as exc:
        if is_db_outage(exc) and not is_lock_conflict(exc):
            raise  # the database is gone: every job of the batch would fail the same way
        log.warning(
            "group commit fell back to one job at a time",
            extra={"jobs": len(items), "error": _describe(exc)},
        )
    results: list[R | BaseException] = []
    for item in items:
        try:
            results.append(await alone(item))
        except Exception as exc:  # this job's own error, handed to its own caller
            results.append(exc)
    return results


def _describe(exc: BaseException) -> Any:
    return f"{type(exc).__name__}: {exc}"[:300]
