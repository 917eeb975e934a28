"""Wire schema of a report type as `GET /v1/report-types` lists it.

The params schema is the type's pydantic model as JSON Schema (a declared type's: the schema declared);
`GET /v1/report-types/declarations` shows REPORT_TYPES_FILE's state.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from app.reports.declared import Status
from app.reports.registry import ReportType, registry


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


class DeclarationErrorPublic(BaseModel):
    file: str | None = Field(description="The report-types file")
    line: int | None = Field(description="The line at fault (null: the file as a whole)")
    type: str | None = Field(description="The declared type at fault, if one is")
    field: str | None = Field(description="Its field at fault (`sql`, `params`, `source` …)")
    reason: str


class DeclaredTypePublic(BaseModel):
    name: str
    kind: str = Field(description="`sql`, …")


class DeclarationsPublic(BaseModel):
    """REPORT_TYPES_FILE in the process that answers: the declared types in force, when they were
    loaded, and why the last load was refused (`error`; the types in force are then the ones before)."""

    file: str | None = Field(description="The file read (null: REPORT_TYPES_FILE is not set)")
    types: list[DeclaredTypePublic]
    loaded_at: datetime | None = Field(description="When the types in force were loaded")
    checked_at: datetime | None = Field(description="When the file was last read")
    error: DeclarationErrorPublic | None = Field(
        description="Why the last read was refused; null if it was not"
    )

    @classmethod
    def of(cls, status: Status) -> DeclarationsPublic:
        kinds = {t.name: t.kind for t in registry.declared()}
        return cls(
            file=status.file,
            types=[DeclaredTypePublic(name=n, kind=kinds.get(n, "?")) for n in status.types],
            loaded_at=status.loaded_at,
            checked_at=status.checked_at,
            error=DeclarationErrorPublic.model_validate(status.error.as_dict()) if status.error else None,
        )
