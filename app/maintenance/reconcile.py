"""Reconciliation: every job waiting to run (pending, retrying, scheduled) has its one message in Redis.

A keyset cursor per status walks MySQL a page a tick and wraps around, kept in Redis so scheduler replicas
share it; once Redis lost its state (a flush, a new server) the walk covers every waiting job, page by page.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.core import failpoints, redis_pool, tracing
from app.core.config import get_settings
from app.core.db import session_scope
from app.core.ids import new_id
from app.core.states import JobStatus
from app.core.times import utcnow
from app.dispatch import capacity, queue
from app.dispatch.lanes import Lane
from app.fairshare import service as fairshare
from app.maintenance.repository import MaintenanceRepository, WaitingJob

log = logging.getLogger(__name__)

# Rows a status reads per tick in steady state: a full pass over N waiting jobs of a status takes
# ceil(N / PAGE_ROWS) ticks, whatever waits legitimately (pauses, caps, successors of a dead predecessor).
PAGE_ROWS = 1000
STATUSES = (JobStatus.PENDING, JobStatus.RETRYING, JobStatus.SCHEDULED)
STATE = "reconcile"  # sweep_state: "after:{status}" the cursor, "swept:{status}" / "swept" full walk
SWEPT = "swept"  # set once a full walk covered every status since Redis last lost its state
EPOCH = "epoch"  # the full walk the cursors belong to
MIN_BUDGET_S = 1.0  # how long a tick's full walk may go on before it leaves the rest to the next tick


def grace_s() -> float:
    """A pending job or alert younger than this is probably being enqueued right now: leave it be."""
    return min(2.0, get_settings().scan_interval_s)


def budget_s() -> float:
    """How long one tick's walk may run: within the tick's lease, so replicas do not walk side by side."""
    return max(MIN_BUDGET_S, 0.8 * get_settings().scan_interval_s)


@dataclass
class Walk:
    """One tick's reconciliation: the shared cursor as read, and what this tick did."""

    state: dict[str, str]
    full: bool
    deadline: float
    epoch: str = ""  # the full walk's (app/core/lua/sweep_begin.lua): every save is fenced by it
    pages: int = 0
    requeued: int = 0

    def after(self, status: JobStatus) -> str:
        return self.state.get(f"after:{status.value}", "")

    def swept(self, status: JobStatus) -> bool:
        return self.state.get(f"swept:{status.value}") == "1"


async def reconcile(budget: float | None = None) -> int:
    """Enqueue the waiting jobs Redis does not hold (after a flush, a restart, a lost enqueue, a message
    dropped with a dead claimer's slot), and put back in its lane a queued message nobody holds: one
    script call a page. Returns how many jobs got their message back.

    A job that waits long is not a reason to re-enqueue it: caps, pauses and fair share make jobs wait by
    design, and one message per job (app.dispatch.lanes) makes a visit to a held job a no-op. In steady state
    each status reads one page a tick; after Redis lost its state (the `swept` mark is gone with it) the
    tick walks every page it can within `budget` seconds, and the next tick goes on from the cursor.

    Every save of the shared state is fenced by the walk's epoch: a walker that read the state before a
    flush (or before a newer full walk began) writes nothing and stops, so `swept` is only ever set by a
    walk that covered every waiting job since Redis last lost its state."""
    deadline = time.monotonic() + (budget_s() if budget is None else budget)
    state = await redis_pool.sweep_state(STATE)
    walk = Walk(state, SWEPT not in state, deadline, state.get(EPOCH, ""))
    if walk.full:
        walk.epoch = await redis_pool.begin_sweep(STATE, new_id())
        walk.state = await redis_pool.sweep_state(STATE)  # the cursors of that walk, if it is under way
        if not await capacity.dispatch_ready():
            await fairshare.rebuild_dispatch()  # caps hold through the flush before anything is claimed
        log.warning("reconciliation: Redis lost its state; walking every waiting job")
    for status in STATUSES:
        if not await _walk_status(walk, status):
            log.warning("reconciliation: Redis lost its state during the walk; the next walk starts over")
            return walk.requeued
    if walk.full and all(walk.swept(status) for status in STATUSES):
        await redis_pool.save_sweep_state_if(STATE, walk.epoch, False, {SWEPT: "1"})
    return walk.requeued


async def redis_lost_state() -> bool:
    """Redis no longer holds the mark of a finished walk: flushed, restarted empty, or never walked yet."""
    return SWEPT not in await redis_pool.sweep_state(STATE)


async def recover_if_flushed() -> int | None:
    """Once Redis lost its state, the walk over every waiting job now rather than at the next tick (the
    scheduler looks every second): a backlog is back in its lanes at the speed of MySQL and Redis. One
    replica at a time; None when there was nothing to do."""
    if not await redis_lost_state():
        return None
    lock = await redis_pool.try_lock("reconcile-recovery", ttl_s=budget_s() + 5.0)
    if lock is None:
        return None
    try:
        return await reconcile()
    finally:
        with contextlib.suppress(Exception):  # expired, or Redis went away again: the TTL frees it
            await lock.release()


async def _walk_status(walk: Walk, status: JobStatus) -> bool:
    """One page of `status` from its cursor; during a full walk, pages until the status is covered. False
    once a save found the state changed under the walk (a flush, a newer walk): stop."""
    full = walk.full and not walk.swept(status)
    after = walk.after(status)
    while True:
        if walk.pages:
            await failpoints.hit("reconcile.between_pages")
        async with session_scope() as session:
            rows = await MaintenanceRepository(session).waiting_page(status, after, PAGE_ROWS)
        walk.pages += 1
        walk.requeued += await enqueue_missing(rows, grace=not walk.full)
        after = rows[-1].id if len(rows) == PAGE_ROWS else ""  # a short page is the end: wrap around
        saved = {f"after:{status.value}": after}
        if full and not after:
            saved[f"swept:{status.value}"] = "1"
        if not await redis_pool.save_sweep_state_if(STATE, walk.epoch, not walk.full, saved):
            return False
        walk.state.update(saved)
        if not full or not after or time.monotonic() > walk.deadline:
            return True


async def reconcile_jobs(job_ids: Sequence[str]) -> int:
    """Enqueue these jobs if they wait to run and Redis does not hold them (e.g. the sweep just dropped the
    message of a claimer that died before it started them): now, not when the cursor comes round."""
    async with session_scope() as session:
        rows = await MaintenanceRepository(session).waiting_among(job_ids)
    return await enqueue_missing(rows, grace=False)


async def enqueue_missing(rows: Sequence[WaitingJob], grace: bool) -> int:
    """Each job's message, deferred to when it is due; a job that has one is left as it is (one message per
    job). With `grace`, a pending job changed in the last `grace_s()` is skipped: its enqueue is under way.
    A job its recorded predecessor still holds back gets none: that one's end wakes it. Enqueued, a keyed
    backlog behind a dead or slow job would be claimed, refused and dropped again pass after pass, taking
    slots of its tenant's and type's caps from the jobs that can run (the 10-minute soak's stranded jobs)."""
    now = utcnow()
    young = now - timedelta(seconds=grace_s())
    jobs = [
        row
        for row in rows
        if not (grace and row.status == JobStatus.PENDING and row.updated_at > young)
        and not row.behind_its_predecessor()
    ]
    if not jobs:
        return 0
    messages = [
        queue.RunMessage(
            row.id,
            row.replay_count,
            _deferred_until(row, now),
            row.traceparent,
            Lane(row.priority, row.tenant, row.report_type),
        )
        for row in jobs
    ]
    queued, _ = await queue.enqueue_messages(messages)
    for row, was_queued in zip(jobs, queued, strict=True):
        if was_queued:
            _mark_reenqueued(row)
    return sum(queued)


def _deferred_until(row: WaitingJob, now: datetime) -> datetime | None:
    due_at = row.next_attempt_at if row.status == JobStatus.RETRYING else row.run_at
    return due_at if row.status != JobStatus.PENDING and due_at is not None and due_at > now else None


def _mark_reenqueued(row: WaitingJob) -> None:
    """A `reenqueue` span in the job's own trace (linked to the scheduler tick that found it)."""
    with tracing.span(
        "reenqueue",
        parent=row.traceparent,
        links=[tracing.current_traceparent()],
        attributes={"job.id": row.id, "job.status": row.status.value, "reenqueue.reason": "missing"},
    ):
        pass
