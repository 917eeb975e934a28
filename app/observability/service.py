"""The state snapshot behind the API's gauges: one round of cheap reads, cached for METRICS_CACHE_S so a
scrape every few seconds (or several Prometheus replicas) costs one round at most per period.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from app.core.config import get_settings
from app.core.db import session_scope
from app.core.times import utcnow
from app.dead_letters.repository import DeadLetterRepository
from app.dispatch import queue
from app.fleet.repository import FleetRepository
from app.observability.repository import LiveJobs, StateRepository

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StateSnapshot:
    ok: bool
    taken_at: datetime
    live_jobs: list[LiveJobs] = field(default_factory=list)
    dead_letters_open: int = 0
    alerts_pending: dict[str, int] = field(default_factory=dict)
    callbacks_pending: int = 0
    workers_live: dict[str, int] = field(default_factory=dict)
    scheduler_last_tick_at: datetime | None = None
    queue_lengths: dict[str, int] = field(default_factory=dict)

    @property
    def oldest_eligible_age_s(self) -> float:
        oldest = [j.oldest_eligible_since for j in self.live_jobs if j.oldest_eligible_since is not None]
        return max(0.0, (self.taken_at - min(oldest)).total_seconds()) if oldest else 0.0

    @property
    def scheduler_tick_age_s(self) -> float:
        if self.scheduler_last_tick_at is None:
            return math.inf
        return max(0.0, (self.taken_at - self.scheduler_last_tick_at).total_seconds())


class _Cache:
    def __init__(self) -> None:
        self.snapshot: StateSnapshot | None = None
        self.monotonic_at = 0.0
        self.lock = asyncio.Lock()
        self.refreshing: asyncio.Task[None] | None = None

    def age_s(self) -> float:
        return time.monotonic() - self.monotonic_at

    async def refresh(self) -> StateSnapshot:
        async with self.lock:
            if self.snapshot is None or self.age_s() >= get_settings().metrics_cache_s:
                self.snapshot = await take_snapshot()
                self.monotonic_at = time.monotonic()
            return self.snapshot

    async def _refresh_quietly(self) -> None:
        try:
            await self.refresh()
        finally:
            self.refreshing = None


# A snapshot up to this much older than METRICS_CACHE_S is still served (and refreshed behind the scrape),
# so a scrape never waits for the database once the first one has.
STALE_GRACE_S = 30.0

_cache = _Cache()


async def take_snapshot() -> StateSnapshot:
    """Read everything now; a failed read gives a snapshot with ok=False (the scrape still answers)."""
    settings = get_settings()
    now = utcnow()
    try:
        async with session_scope() as session:
            state, fleet = StateRepository(session), FleetRepository(session)
            live = await state.live_jobs(now)
            letters = await DeadLetterRepository(session).open_letters(None)
            alerts = await state.pending_alerts()
            callbacks = await state.pending_callbacks()
            workers = await fleet.live_counts(now - timedelta(seconds=settings.worker_live_for_s))
            last_tick = await fleet.last_tick_at()
        lengths = await queue.queue_lengths()
    except Exception as exc:
        log.warning("metrics state unavailable", extra={"error": repr(exc)})
        return StateSnapshot(ok=False, taken_at=now)
    return StateSnapshot(True, now, live, letters, alerts, callbacks, workers, last_tick, lengths)


async def snapshot() -> StateSnapshot:
    """The cached snapshot. Fresh (younger than METRICS_CACHE_S): served. Stale by less than STALE_GRACE_S:
    served while one refresh runs in the background. Older, missing, or METRICS_CACHE_S=0: read now
    (concurrent scrapes share one read)."""
    max_age_s = get_settings().metrics_cache_s
    cached = _cache.snapshot
    if cached is not None and max_age_s > 0:
        age_s = _cache.age_s()
        if age_s < max_age_s:
            return cached
        if age_s < max_age_s + STALE_GRACE_S:
            if _cache.refreshing is None:
                _cache.refreshing = asyncio.create_task(_cache._refresh_quietly())
            return cached
    return await _cache.refresh()


def forget_snapshot() -> None:
    """Drop the cache (tests that change the data and read at once)."""
    _cache.snapshot = None
    _cache.monotonic_at = 0.0
