"""Which (tenant, report type) pairs have a notify route for slow runs, as this process last read them
(every ROUTES_REFRESH_S at most): a job they cover starts with effects, so its success can measure it.
"""

from __future__ import annotations

import logging
import time

from app.core.db import session_scope
from app.destinations.repository import DestinationRepository

log = logging.getLogger(__name__)

ROUTES_REFRESH_S = 30.0  # a new slow route covers jobs started at most this long after it was made

_covered: frozenset[tuple[str, str | None]] | None = None  # None: never read (every job is covered)
_read_at = float("-inf")


async def refresh_if_stale() -> None:
    """Read the routes again when the last good read is older than ROUTES_REFRESH_S (one small query). A
    failed read changes nothing and is tried again on the next start; until one read succeeded, `covers`
    answers yes for every job (it starts with effects: slower, never blind)."""
    global _covered, _read_at
    if time.monotonic() - _read_at < ROUTES_REFRESH_S:
        return
    try:
        async with session_scope() as session:
            _covered = frozenset(await DestinationRepository(session).slow_route_keys())
    except Exception as exc:  # the start itself meets the outage and says so; this answer can wait
        log.warning("slow-run routes not read; the last ones stand", extra={"error": repr(exc)})
        return
    _read_at = time.monotonic()


def covers(tenant: str, report_type: str) -> bool:
    if _covered is None:
        return True
    return (tenant, report_type) in _covered or (tenant, None) in _covered


def forget() -> None:
    """Tests: read the routes again on the next start."""
    global _covered, _read_at
    _covered, _read_at = None, float("-inf")
