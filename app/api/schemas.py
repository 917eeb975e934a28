"""Wire schemas (JobCreate, JobPublic, JobPage, …); table models never leave the service layer raw.

Timestamps are RFC 3339 UTC with microseconds, e.g. `2026-11-22T12:00:30.000000Z`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    model_validator,
)

from app.models import DeadLetter, JobAttempt, JobStep
from app.reports.registry import ReportType
from app.states import AlertStatus, AttemptOutcome, CallbackStatus, JobStatus, StepStatus


def _stamp(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


Stamp = Annotated[datetime, PlainSerializer(_stamp, return_type=str, when_used="json")]


def _iso_only(value: Any) -> Any:
    """Pydantic would take a number as a Unix timestamp; the API documents RFC 3339 strings only."""
    if not isinstance(value, str | datetime):
        raise ValueError("expected an RFC 3339 date-time string")
    if isinstance(value, str) and not re.match(r"^\d{4}-\d{2}-\d{2}[Tt ]", value):
        raise ValueError("expected an RFC 3339 date-time string, e.g. 2026-11-22T12:00:00Z")
    return value


IsoDateTime = Annotated[AwareDatetime, BeforeValidator(_iso_only)]


class JobCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"report_type": "demo.csv", "params": {"rows": 1000}}]},
    )

    report_type: str = Field(min_length=1, max_length=100, description="A registered report type name")
    params: dict[str, Any] = Field(
        default_factory=dict, description="Checked against the type's params schema"
    )
    run_at: IsoDateTime | None = Field(None, description="Start no earlier than this (≤ 30 days ahead)")
    max_attempts: int | None = Field(None, ge=1, le=100, description="Overrides the type's attempt budget")
    ordering_key: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Jobs of one tenant with the same key run one at a time, in submission order",
    )
    on_predecessor_dead: Literal["wait", "continue"] = Field(
        "wait", description="With an ordering_key: wait for a dead earlier job to be replayed, or run anyway"
    )
    callback_url: str | None = Field(None, min_length=1, max_length=2000, pattern=r"^https?://")


class ErrorInfo(BaseModel):
    type: str
    message: str
    retryable: bool


class OutputPublic(BaseModel):
    url: str
    filename: str
    content_type: str
    size: int


class CallbackState(BaseModel):
    status: CallbackStatus | None
    attempts: int
    last_error: str | None


class JobPublic(BaseModel):
    """The documented shape; answers are built by `app.representation.job_document`."""

    id: str
    report_type: str
    params: dict[str, Any]
    status: JobStatus
    attempt: int
    max_attempts: int
    next_attempt_at: Stamp | None
    run_at: Stamp | None
    ordering_key: str | None
    on_predecessor_dead: str
    blocked_by: str | None
    progress: float | None
    last_error: ErrorInfo | None
    output: OutputPublic | None
    replay_count: int
    callback_url: str | None
    callback: CallbackState | None
    created_at: Stamp
    started_at: Stamp | None
    finished_at: Stamp | None
    updated_at: Stamp


class JobPage(BaseModel):
    items: list[JobPublic]
    next_cursor: str | None


class AttemptPublic(BaseModel):
    attempt: int
    started_at: Stamp
    finished_at: Stamp | None
    outcome: AttemptOutcome
    error: ErrorInfo | None
    worker: str | None

    @classmethod
    def of(cls, row: JobAttempt) -> AttemptPublic:
        return cls(
            attempt=row.attempt,
            started_at=row.started_at,
            finished_at=row.finished_at,
            outcome=row.outcome,
            error=ErrorInfo.model_validate(row.error) if row.error else None,
            worker=row.worker,
        )


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


class StepPublic(BaseModel):
    name: str
    mode: str
    status: StepStatus
    attempts: int
    last_error: ErrorInfo | None
    started_at: Stamp | None
    finished_at: Stamp | None

    @classmethod
    def of(cls, row: JobStep) -> StepPublic:
        return cls(
            name=row.name,
            mode=row.mode,
            status=row.status,
            attempts=row.attempts,
            last_error=ErrorInfo.model_validate(row.last_error) if row.last_error else None,
            started_at=row.started_at,
            finished_at=row.finished_at,
        )


class ReplayRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    steps: list[Annotated[str, Field(min_length=1, max_length=100)]] | None = Field(
        None, max_length=100, description="Steps to run again (default: every failed step)"
    )


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


class Health(BaseModel):
    status: str
    checks: dict[str, str] = Field(default_factory=dict)


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
    alert: AlertPublic

    @classmethod
    def of(cls, row: DeadLetter) -> DeadLetterPublic:
        return cls(
            id=row.id,
            job_id=row.job_id,
            tenant=row.tenant,
            report_type=row.report_type,
            params=row.params,
            error=ErrorInfo.model_validate(row.error) if row.error else None,
            attempts=row.attempts,
            created_at=row.created_at,
            expire_at=row.expire_at,
            archived_at=row.archived_at,
            replayed_at=row.replayed_at,
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
