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

_covered: frozenset[tuple[str, str | None]] = frozenset()
_read_at = float("-inf")


async def refresh_if_stale() -> None:
    """Read the routes again when the last read is older than ROUTES_REFRESH_S (one small query); a failed
    read keeps the last answer (it is tried again on the next start)."""
    global _covered, _read_at
    if time.monotonic() - _read_at < ROUTES_REFRESH_S:
        return
    _read_at = time.monotonic()
    try:
        async with session_scope() as session:
            _covered = frozenset(await DestinationRepository(session).slow_route_keys())
    except Exception as exc:  # the start itself meets the outage and says so; this answer can wait
        log.warning("slow-run routes not read; the last ones stand", extra={"error": repr(exc)})


def covers(tenant: str, report_type: str) -> bool:
    return (tenant, report_type) in _covered or (tenant, None) in _covered


def forget() -> None:
    """Tests: read the routes again on the next start."""
    global _covered, _read_at
    _covered, _read_at = frozenset(), float("-inf")
