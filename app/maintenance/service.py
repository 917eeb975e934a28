"""The scheduler's periodic work as plain async functions: rescue lost attempts, reconcile Redis with
MySQL, re-publish pending alerts, archive dead letters, purge expired jobs and their files, and forget
worker-registry rows silent for a day.

Every action is idempotent (CAS updates, one message per job in Redis); a Redis lease just keeps replicas
from doing the same work in the same tick.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from app.attempts.rescue import declare_lost
from app.callbacks.service import republish_due
from app.core import redis_pool
from app.core.config import get_settings
from app.core.db import session_scope
from app.core.states import TERMINAL, JobStatus
from app.core.times import utcnow
from app.dead_letters.service import archive_and_purge, republish_pending
from app.destinations import delivery
from app.fairshare import service as fairshare
from app.fleet import service as fleet
from app.maintenance.deadlines import check_deadlines
from app.maintenance.reconcile import grace_s, reconcile, reconcile_jobs
from app.maintenance.repository import Expiry, MaintenanceRepository, RetentionEntry
from app.outputs import get_output_store
from app.outputs.base import OutputStore, OutputStoreUnavailable

log = logging.getLogger(__name__)

# Jobs a retention batch reads, deletes the files of, then deletes (one guarded DELETE): a batch takes a few
# hundred ms on MariaDB, most of it the DELETE's index maintenance (every index of the job and its children).
PURGE_BATCH = 2000
# Batches whose files and rows are being deleted at once (MySQL), while the walk reads the next page: the
# DELETEs of disjoint batches run side by side on the server's cores. SQLite has one writer: one batch.
PURGE_STREAMS = 2
# How far into a tick retention may start new rounds of batches: within the tick's lease (0.8 of the
# interval), so replicas never purge side by side; the first round (a batch of each status) always runs.
PURGE_SHARE = 0.7


# The walk of each status goes on from where the last tick left it: the jobs that must stay (a dead letter's,
# an Idempotency-Key's, a schedule's keep_outputs_s) gather at the head of the index and are read again only
# this often, not every tick (a tick reads what finished since, whatever stays behind it).
REVISIT_S = 900.0
# A job's finished_at is read before its transaction commits (a lock wait may hold it up to MariaDB's 50 s):
# the walk goes on from no later than this far behind the cut-off, so a late commit is never passed over.
LATE_COMMIT_S = 120.0
# Per status: where the last tick's walk ended, and when (monotonic seconds) it last started from the head.
_walk_from: dict[JobStatus, tuple[RetentionEntry | None, float]] = {}


def forget_retention_walk() -> None:
    """Start every status's walk from the head on the next tick (tests; a replica taking over does)."""
    _walk_from.clear()


def purge_budget_s() -> float:
    """How long a tick's retention may start new rounds of batches."""
    return PURGE_SHARE * get_settings().scan_interval_s


@dataclass
class Retention:
    """One tick's purge: the cut-offs, the walk's cursor in each terminal status (gone once the status has
    nothing more expired), the batches under way, and what they did."""

    expiry: Expiry
    deadline: float
    store: OutputStore
    cursors: dict[JobStatus, RetentionEntry | None] = field(
        default_factory=lambda: dict.fromkeys(sorted(TERMINAL))
    )
    running: set[asyncio.Task[None]] = field(default_factory=set)
    purged: int = 0
    outage: bool = False

    def resume(self) -> None:
        """Each status's walk from where the last tick's ended, or from the head once REVISIT_S passed."""
        now = time.monotonic()
        for status in self.cursors:
            entry, from_head_at = _walk_from.get(status, (None, now - REVISIT_S))
            if now - from_head_at >= REVISIT_S:
                _walk_from[status] = (None, now)
            else:
                self.cursors[status] = entry

    async def next_page(self, status: JobStatus) -> dict[str, int]:
        """The expired ids of the status's next page, each with the replay read; moves its cursor on."""
        async with session_scope() as session:
            repo = MaintenanceRepository(session)
            page = await repo.retention_page(status, self.expiry, self.cursors[status], PURGE_BATCH)
        reached = page[-1] if page else self.cursors[status]
        floor = self.expiry.finished_before - timedelta(seconds=LATE_COMMIT_S)
        if reached is not None and reached.finished_at > floor:
            reached = RetentionEntry("", floor, expired=False)
        _walk_from[status] = (reached, _walk_from.get(status, (None, time.monotonic()))[1])
        if len(page) < PURGE_BATCH:
            del self.cursors[status]  # nothing more expired in this status
        else:
            self.cursors[status] = page[-1]
        return {entry.id: entry.replay_count for entry in page if entry.expired}

    async def purge(self, replays: dict[str, int]) -> None:
        """Files first (those of the replays read: a job replayed since keeps its new run's), then the rows
        still expired. An outage keeps the whole batch and ends the tick."""
        job_ids = list(replays)
        try:
            await self.store.delete_jobs(job_ids, replays)
        except OutputStoreUnavailable:
            self.outage = True
            return
        async with session_scope() as session:
            deleted = await MaintenanceRepository(session).delete_expired(job_ids, self.expiry)
        self.purged += deleted  # not `+= await`: that reads the total before the batches beside it add

    async def settle(self, streams: int) -> None:
        """Wait until fewer than `streams` batches are under way (a failed one's error goes up)."""
        while len(self.running) >= max(1, streams):
            done, self.running = await asyncio.wait(self.running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()

    def over(self) -> bool:
        return self.outage or not self.cursors or time.monotonic() >= self.deadline


async def purge_expired_jobs(budget_s: float | None = None) -> int:
    """Delete expired jobs with their files, round after round until nothing expired is left or `budget_s`
    (default `purge_budget_s()`) is spent; returns how many went. Each terminal status is a keyset walk of
    its own (a pure range of the (status, finished_at) index) that goes on from where the last tick's ended
    (REVISIT_S); a round takes a batch of each, and the first round always runs. PURGE_STREAMS batches are
    deleted at once on MySQL.

    Files go first: a batch whose files could not all be deleted (the object store is down) keeps its rows,
    and the tick stops there, so the next one tries again and no object is ever orphaned."""
    settings = get_settings()
    now = utcnow()
    expiry = Expiry(
        finished_before=now - timedelta(seconds=settings.job_retention_s),
        idempotent_before=now - timedelta(seconds=settings.idempotency_ttl_s),
        now=now,
    )
    deadline = time.monotonic() + (purge_budget_s() if budget_s is None else budget_s)
    retention = Retention(expiry, deadline, get_output_store())
    retention.resume()
    streams = 1 if settings.is_sqlite else PURGE_STREAMS
    try:
        try:
            while True:  # a round: a batch of each status with any left; the first whatever the budget
                for status in list(retention.cursors):
                    job_ids = await retention.next_page(status)
                    if job_ids:
                        retention.running.add(asyncio.create_task(retention.purge(job_ids)))
                    await retention.settle(streams)
                    if retention.outage:
                        break
                if retention.over():
                    break
        finally:
            await retention.settle(0)  # the batches under way end (or fail) before the tick goes on
    except BaseException:
        forget_retention_walk()  # a batch that failed (an outage, a deadlock) goes on the next tick
        raise
    if retention.outage:
        forget_retention_walk()  # the batch kept goes on the next tick: its walk starts from the head
        log.warning("retention: output store unavailable; expired jobs kept until the next tick")
    return retention.purged


async def run_tick(use_lease: bool = True) -> dict[str, Any]:
    settings = get_settings()
    started = time.monotonic()
    report: dict[str, Any] = {}
    if use_lease:
        try:
            # Kept until it expires, so other replicas skip this tick.
            lease_s = max(0.05, settings.scan_interval_s * 0.8)
            if await redis_pool.try_lock("scheduler-tick", ttl_s=lease_s) is None:
                return {"skipped": "another scheduler replica holds this tick"}
        except Exception as exc:  # Redis down: the MySQL-side work is idempotent and still safe to do
            report["redis"] = f"unavailable: {type(exc).__name__}"
    report["lost"] = await declare_lost(settings.stuck_after_s)
    try:
        await fairshare.publish_policy()
        freed = await fairshare.sweep_slots()
        report["slots_freed"] = len(freed)
        report["reenqueued"] = await reconcile_jobs(freed) + await reconcile()
        report["alerts_republished"] = await republish_pending(grace_s())
        report["callbacks_republished"] = await republish_due()
        report["deliveries_republished"] = await delivery.republish_due()
        report["late_notices"] = await check_deadlines()
    except Exception as exc:
        report["redis"] = f"unavailable: {type(exc).__name__}"
    report.update(await archive_and_purge())
    # Retention takes what is left of its share of the interval (its first round whatever is left).
    report["jobs_purged"] = await purge_expired_jobs(started + purge_budget_s() - time.monotonic())
    report["workers_purged"] = await fleet.purge_gone(fleet.PURGE_GONE_AFTER_S)
    return report
