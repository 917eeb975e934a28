"""Pydantic types shared by every domain's wire schemas: timestamps in, timestamps out, error details.

Timestamps go out as RFC 3339 UTC with microseconds (`2026-11-22T12:00:30.000000Z`), come in as strings.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BaseModel, BeforeValidator, PlainSerializer

from app.core.times import stamp

Stamp = Annotated[datetime, PlainSerializer(stamp, return_type=str, when_used="json")]


def _iso_only(value: Any) -> Any:
    """Pydantic would take a number as a Unix timestamp; the API documents RFC 3339 strings only."""
    if not isinstance(value, str | datetime):
        raise ValueError("expected an RFC 3339 date-time string")
    if isinstance(value, str) and not re.match(r"^\d{4}-\d{2}-\d{2}[Tt ]", value):
        raise ValueError("expected an RFC 3339 date-time string, e.g. 2026-11-22T12:00:00Z")
    return value


def _in_utc(value: datetime) -> datetime:
    """Stored and compared in UTC: a date-time UTC cannot hold (past year 9999 once converted) is refused."""
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("date-time out of range once converted to UTC") from None


IsoDateTime = Annotated[AwareDatetime, BeforeValidator(_iso_only), AfterValidator(_in_utc)]


class ErrorInfo(BaseModel):
    type: str
    message: str
    retryable: bool

    @classmethod
    def of(cls, error: dict[str, Any] | None) -> ErrorInfo | None:
        return cls.model_validate(error) if error else None
