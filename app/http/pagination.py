"""Keyset pagination of the API's listings: opaque cursors over ULID ids, newest first.

A cursor is the last id of a page, base64url-encoded; a listing never shows an item twice or skips one.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

from fastapi import Path, Query

from app.core.errors import NotFound, ValidationFailed
from app.core.ids import ULID_RE

MAX_LIMIT = 200
DEFAULT_LIMIT = 50

JobId = Annotated[str, Path(description="Job id (ULID)")]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT)]
Cursor = Annotated[str | None, Query(max_length=100, description="`next_cursor` of the previous page")]


def check_id(job_id: str) -> str:
    """A malformed id names no job: 404 without a lookup."""
    if not ULID_RE.match(job_id):
        raise NotFound(f"No job {job_id[:40]!r}.")
    return job_id


def encode_cursor(last_id: str) -> str:
    return base64.urlsafe_b64encode(last_id.encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raw = ""
    if not ULID_RE.match(raw):
        raise ValidationFailed(
            "Bad cursor.",
            [{"loc": ["cursor"], "msg": "not a cursor from this API", "type": "cursor"}],
            "query",
        )
    return raw


def decode_number_cursor(cursor: str | None) -> int | None:
    """The cursor of a listing keyed by an autoincrement id (a schedule's runs)."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raw = ""
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19:
        raise ValidationFailed(
            "Bad cursor.",
            [{"loc": ["cursor"], "msg": "not a cursor from this API", "type": "cursor"}],
            "query",
        )
    return int(raw)


def next_cursor(ids: list[str], limit: int, resume_before: str | None = None) -> str | None:
    """Given the ids of `limit + 1` rows fetched, the cursor of the next page (None on the last). A page the
    listing cut short before it found `limit + 1` carries where to go on (`resume_before`)."""
    if len(ids) > limit:
        return encode_cursor(ids[limit - 1])
    return encode_cursor(resume_before) if resume_before else None
