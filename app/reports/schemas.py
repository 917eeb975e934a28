"""Wire schema of a report type as `GET /v1/report-types` lists it.

The params schema is the type's pydantic model as JSON Schema.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from app.reports.registry import ReportType


class ReportTypePublic(BaseModel):
    name: str
    description: str
    params_schema: dict[str, Any]
    timeout_s: float
    max_attempts: int

    @classmethod
    def of(cls, rtype: ReportType, default_timeout_s: float, default_max_attempts: int) -> ReportTypePublic:
        return cls(
            name=rtype.name,
            description=rtype.description,
            params_schema=rtype.params_schema(),
            timeout_s=rtype.timeout_s or default_timeout_s,
            max_attempts=rtype.max_attempts or default_max_attempts,
        )
