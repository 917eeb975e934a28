"""Which (tenant, report type) pairs have owners for slow runs (a notify route, a schedule's `notify_to`), as
this process last read them (every ROUTES_REFRESH_S at most): a job they cover starts with effects.
"""

from __future__ import annotations

import logging
import time

from app.core.db import session_scope
from app.destinations.repository import DestinationRepository

log = logging.getLogger(__name__)

ROUTES_REFRESH_S = 30.0  # a new slow route covers jobs started at most this long after it was made

_covered: frozenset[tuple[str, str | None]] | None = None  # None: never read (every job is covered)
_scheduled: frozenset[tuple[str, str]] = frozenset()  # the types of schedules with owners
_read_at = float("-inf")


async def refresh_if_stale() -> None:
    """Read the routes again when the last good read is older than ROUTES_REFRESH_S (one small query). A
    failed read changes nothing and is tried again on the next start; until one read succeeded, `covers`
    answers yes for every job (it starts with effects: slower, never blind)."""
    global _covered, _scheduled, _read_at
    if time.monotonic() - _read_at < ROUTES_REFRESH_S:
        return
    try:
        async with session_scope() as session:
            repo = DestinationRepository(session)
            routes, scheduled = await repo.slow_route_keys(), await repo.notifying_schedule_keys()
            _covered, _scheduled = frozenset(routes), frozenset(scheduled)
    except Exception as exc:  # the start itself meets the outage and says so; this answer can wait
        log.warning("slow-run routes not read; the last ones stand", extra={"error": repr(exc)})
        return
    _read_at = time.monotonic()


def covers(tenant: str, report_type: str, scheduled: bool = False) -> bool:
    """Whether a job of this tenant and type (`scheduled`: fired by a schedule) may have owners to hear
    a slow run of it."""
    if _covered is None:
        return True
    if scheduled and (tenant, report_type) in _scheduled:
        return True
    return (tenant, report_type) in _covered or (tenant, None) in _covered


def forget() -> None:
    """Tests: read the routes again on the next start."""
    global _covered, _scheduled, _read_at
    _covered, _scheduled, _read_at = None, frozenset(), float("-inf")
