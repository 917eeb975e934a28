"""Wire schemas of the health endpoints: liveness and readiness answers, with each dependency's check."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Health(BaseModel):
    status: str
    checks: dict[str, str] = Field(default_factory=dict)
