"""Group commit of a worker's starts and successes: concurrent attempts in one process share a transaction
(one locking read, one UPDATE, one multi-row INSERT, one commit), and each job is still decided alone.

The rows are read `FOR UPDATE`, each job is checked as `service.start_attempt` checks it, and the UPDATE
carries every job's own compare-and-set; a job that loses is answered Skip (or False) and its neighbours
commit. Anything unexpected (a count that does not add up, a deadlock, a bug) sends the batch back through
the one-job path, job by job, so an error only ever fails its own job. A connection lost is raised to all.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any, TypeVar

from app.attempts import service
from app.attempts.repository import AttemptRepository
from app.core.config import get_settings
from app.core.db import is_db_outage, is_lock_conflict, session_scope
from app.core.grouping import GroupCommit
from app.core.states import AttemptKey, AttemptOutcome
from app.core.times import utcnow
from app.jobs.effects import TerminalEffects
from app.jobs.repository import JobRepository
from app.models import ReportJob
from app.reports.base import OutputInfo

log = logging.getLogger(__name__)

Decision = service.Started | service.NotDue | service.Skip | service.Blocked
StartItem = tuple[str, str]  # (job id, worker name)
DoneItem = tuple[AttemptKey, OutputInfo | None]
T = TypeVar("T")
R = TypeVar("R")


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


async def _hand_back(_item: StartItem, decision: Decision) -> None:
    """The caller was cancelled (worker shutdown) while its start was being committed: give the job back."""
    if isinstance(decision, service.Started):
        await service.release_attempt(decision.key)


# ---- starts ---------------------------------------------------------------------------------------------


async def _flush_starts(items: list[StartItem]) -> list[Decision | BaseException]:
    return await _together_or_alone(_start_together, items, lambda item: service.start_attempt(*item))


async def _start_together(items: list[StartItem]) -> list[Decision | BaseException]:
    checked_at = utcnow()
    decisions: dict[int, Decision] = {}
    winners: list[tuple[int, ReportJob, str]] = []
    started: list[tuple[int, ReportJob, AttemptKey, dict[str, Any]]] = []
    async with session_scope() as session:
        jobs, attempts = JobRepository(session), AttemptRepository(session)
        rows = await attempts.lock_jobs(sorted({job_id for job_id, _ in items}))
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
                blocked = await service.blocker_of(jobs, job)
                if blocked is not None:
                    decisions[index] = blocked
                    continue
            winners.append((index, job, worker))
        # Stamped after every predecessor was seen finished (ordering keys: finished_at < started_at).
        now = utcnow()
        if winners:
            if await attempts.start_many([(job, worker) for _, job, worker in winners], now) != len(winners):
                raise _Recheck("a start lost its compare-and-set under the lock")
            started = [(index, job, *service.new_attempt(job, now, worker)) for index, job, worker in winners]
            await attempts.add_attempts([row for *_, row in started])
    for index, job, key, _row in started:
        decisions[index] = service.mark_started(job, key, now)
    return [decisions[index] for index in range(len(items))]


# ---- successes ------------------------------------------------------------------------------------------


async def _flush_successes(items: list[DoneItem]) -> list[bool | BaseException]:
    return await _together_or_alone(_complete_together, items, lambda item: service.complete_attempt(*item))


async def _complete_together(items: list[DoneItem]) -> list[bool | BaseException]:
    keys = [key for key, _ in items]
    if len({key.job_id for key in keys}) != len(keys):
        raise _Recheck("one job twice in a batch")
    now = utcnow()
    effects: list[TerminalEffects] = []
    async with session_scope() as session:
        attempts = AttemptRepository(session)
        mine = await attempts.lock_running(keys)
        won = [(key, output) for key, output in items if key.job_id in mine]
        plain = [key for key, output in won if output is None]
        if plain and await attempts.update_running_many(plain, service.done_values(now, None)) != len(plain):
            raise _Recheck("a success lost its compare-and-set under the lock")
        for key, output in won:
            values = service.done_values(now, output)
            if output is not None and await attempts.update_running(key, values) != 1:
                raise _Recheck("a success lost its compare-and-set under the lock")
        if won:
            await attempts.finish_attempts([key for key, _ in won], AttemptOutcome.SUCCEEDED, now, None)
        for key, _ in won:
            effects.append(await service.terminal_effects(session, key))
    for key in keys:
        if key.job_id in mine:
            service.after_done(key, now)
        else:
            log.warning("late success discarded", extra={"job_id": key.job_id, "attempt": key.attempt})
    for effect in effects:
        await effect.publish()
    return [key.job_id in mine for key in keys]


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
