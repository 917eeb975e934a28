"""Wire schemas of dead letters: the letter document, its page, the bulk-replay request and answer, and the
request resolving a letter by hand.

Built from table rows with `.of(row)`; timestamps as everywhere (RFC 3339 UTC, microseconds).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from app.core.states import AlertStatus
from app.core.wire import ErrorInfo, IsoDateTime, Stamp
from app.models import DeadLetter


class AlertPublic(BaseModel):
    status: AlertStatus
    sent_at: Stamp | None


class DeadLetterPublic(BaseModel):
    id: str
    job_id: str
    tenant: str
    report_type: str
    params: dict[str, Any]
    error: ErrorInfo | None
    attempts: int
    created_at: Stamp
    expire_at: Stamp
    archived_at: Stamp | None
    replayed_at: Stamp | None
    resolved_at: Stamp | None = Field(description="When an operator resolved it by hand (archived then)")
    resolved_by: str | None = Field(description="Who resolved it: the API key and its tenant")
    resolution: str | None = Field(description="Why: what the operator did instead of a replay")
    alert: AlertPublic

    @classmethod
    def of(cls, row: DeadLetter) -> DeadLetterPublic:
        return cls(
            id=row.id,
            job_id=row.job_id,
            tenant=row.tenant,
            report_type=row.report_type,
            params=row.params,
            error=ErrorInfo.of(row.error),
            attempts=row.attempts,
            created_at=row.created_at,
            expire_at=row.expire_at,
            archived_at=row.archived_at,
            replayed_at=row.replayed_at,
            resolved_at=row.resolved_at,
            resolved_by=row.resolved_by,
            resolution=row.resolution,
            alert=AlertPublic(status=row.alert_status, sent_at=row.alert_sent_at),
        )


class DeadLetterPage(BaseModel):
    items: list[DeadLetterPublic]
    next_cursor: str | None


class BulkReplay(BaseModel):
    """Either `job_ids`, or a filter of `report_type` and/or `since`."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"job_ids": ["01JD3Z7Q8J5Q0V6W2XKX4N9M1B"]},
                {"report_type": "demo.csv", "since": "2026-11-22T00:00:00Z"},
            ]
        },
    )

    job_ids: list[Annotated[str, Field(min_length=1, max_length=26)]] | None = Field(
        None, min_length=1, max_length=1000
    )
    report_type: str | None = Field(None, min_length=1, max_length=100)
    since: IsoDateTime | None = None

    @model_validator(mode="after")
    def _one_selector(self) -> BulkReplay:
        if self.job_ids and (self.report_type or self.since):
            raise ValueError("give either job_ids or a report_type/since filter, not both")
        if not self.job_ids and not (self.report_type or self.since):
            raise ValueError("give job_ids, or a report_type and/or since filter")
        return self


class BulkReplayResult(BaseModel):
    replayed: int


class ResolveRequest(BaseModel):
    """What the operator did by hand instead of a replay (kept with the archived letter)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"reason": "Refunded order 2302393013 by hand in the billing tool"}]},
    )

    reason: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]
