"""Time helpers: the current UTC instant and the RFC 3339 stamp every wire document uses.

Stored datetimes are naive UTC (see `app.models.UTCDateTime`); everything in memory is aware.
"""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def stamp(value: datetime) -> str:
    """`2026-11-22T12:00:30.000000Z`: UTC with microseconds, as the API documents."""
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
