"""Wire schemas every route shares: problem details (RFC 9457).

Each domain's own shapes live in its `schemas.py`.
"""

from __future__ import annotations

from pydantic import BaseModel


class FieldError(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[FieldError] | None = None
