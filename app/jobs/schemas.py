"""Wire schemas of jobs: JobCreate in, JobPublic (the one job document), JobPage, attempts and steps out.

Table models never leave a service raw: routes answer these, built with `.of(row)`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.states import CallbackStatus, JobStatus, StepStatus
from app.core.tracing import trace_id_of
from app.core.wire import ErrorInfo, IsoDateTime, Stamp
from app.destinations.schemas import DeliverTo
from app.models import JobStep, ReportJob


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
    deliver_to: list[DeliverTo] = Field(
        default_factory=list, max_length=10, description="Destinations the report goes to once it is done"
    )
    priority: int | None = Field(
        None,
        ge=0,
        le=9,
        strict=True,
        description="0–9, higher starts first among jobs ready to run; default: the report type's, else 5",
    )


class JobBatchItem(JobCreate):
    """One item of `POST /v1/jobs/batch`: a single submit's body and its Idempotency-Key."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"report_type": "demo.csv", "params": {"rows": 10}, "idempotency_key": "order-42"}]
        },
    )

    idempotency_key: str | None = Field(
        None, min_length=1, max_length=200, description="Same meaning as single submit's Idempotency-Key"
    )


MAX_BATCH_ITEMS = 1000

#: An item that is not a valid JobBatchItem is still an item: it gets its own 422, the others go on.
BatchItemIn = Annotated[JobBatchItem | dict[str, Any], Field(union_mode="left_to_right")]


class JobBatchCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"jobs": [{"report_type": "demo.csv", "params": {"rows": 10}}]}],
        },
    )

    jobs: list[BatchItemIn] = Field(
        min_length=1,
        max_length=MAX_BATCH_ITEMS,
        description="1–1,000 job requests; each is answered on its own, in this order. An object that is "
        "not a valid JobBatchItem gets a 422 result of its own",
    )


class OutputPublic(BaseModel):
    url: str
    filename: str
    content_type: str
    size: int


class CallbackState(BaseModel):
    status: CallbackStatus | None
    attempts: int
    last_error: str | None


#: What keeps a waiting job from starting although it is next in line (see JobPublic.waiting_for).
WAITING_FOR_EXAMPLES: list[dict[str, str | int]] = [
    {"paused": "report_type:demo.csv"},
    {"paused": "tenant:acme"},
    {"cap": "report_type:demo.csv", "limit": 2},
    {"cap": "tenant:acme", "limit": 10},
]


class JobPublic(BaseModel):
    """The job document: API answers and completion-callback bodies alike (field names are the contract)."""

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
    blocked_by: str | None = Field(
        description="A pending job's nearest predecessor with the same ordering key that must finish first, "
        "else null"
    )
    priority: int = Field(ge=0, le=9, description="0–9, higher starts first among jobs ready to run")
    waiting_for: dict[str, str | int] | None = Field(
        description="A pending (or due retrying) job's pause or full concurrency cap that keeps it from "
        'starting now although it is next in line: `{"paused": "report_type:NAME"}`, `{"paused": '
        '"tenant:NAME"}`, `{"cap": "report_type:NAME", "limit": N}` or `{"cap": "tenant:NAME", '
        '"limit": N}`; null when only its turn (or `blocked_by`) holds it. Always null in callbacks.',
        examples=WAITING_FOR_EXAMPLES,
    )
    progress: float | None
    last_error: ErrorInfo | None
    output: OutputPublic | None
    replay_count: int
    cancel_requested: bool = Field(
        description="A cancel was asked. A running job keeps running until its worker notices the request at "
        "its next heartbeat and ends `cancelled`; a report that finishes first ends `done` (or `dead`) and "
        "keeps the request visible. Cleared by a replay."
    )
    cancel_requested_at: Stamp | None = Field(
        description="When the (first) cancel was asked; null if none was (since the last replay)"
    )
    callback_url: str | None
    callback: CallbackState | None
    schedule_id: str | None = Field(description="The schedule that made this job, if one did")
    scheduled_for: Stamp | None = Field(
        description="For a schedule's job: its nominal fire time (UTC), whenever the job actually runs"
    )
    trace_id: str | None = Field(
        description="The job's OpenTelemetry trace id (32 hex digits): its submit, every attempt, its alert, "
        "callback and replays are in that trace. Null when tracing was off at submit.",
        pattern="^[0-9a-f]{32}$",
    )
    created_at: Stamp
    started_at: Stamp | None
    finished_at: Stamp | None
    updated_at: Stamp

    @classmethod
    def of(cls, job: ReportJob, waiting_for: dict[str, Any] | None = None) -> JobPublic:
        """The document of `job`; `waiting_for` is what app.fairshare says holds it (None: nothing)."""
        done = job.status == JobStatus.DONE and job.output_filename
        return cls(
            id=job.id,
            report_type=job.report_type,
            params=job.params,
            status=job.status,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            next_attempt_at=job.next_attempt_at,
            run_at=job.run_at,
            ordering_key=job.ordering_key,
            on_predecessor_dead=job.on_predecessor_dead,
            blocked_by=job.blocked_by if job.status == JobStatus.PENDING else None,
            priority=job.priority,
            waiting_for=waiting_for,
            progress=job.progress,
            last_error=ErrorInfo.of(job.last_error),
            output=OutputPublic(
                url=f"/v1/jobs/{job.id}/output",
                filename=job.output_filename or "",
                content_type=job.output_content_type or "application/octet-stream",
                size=job.output_size or 0,
            )
            if done
            else None,
            replay_count=job.replay_count,
            cancel_requested=job.cancel_requested,
            cancel_requested_at=job.cancel_requested_at,
            callback_url=job.callback_url,
            callback=CallbackState(
                status=job.callback_status, attempts=job.callback_attempts, last_error=job.callback_last_error
            )
            if job.callback_url
            else None,
            schedule_id=job.schedule_id,
            scheduled_for=job.scheduled_for,
            trace_id=trace_id_of(job.traceparent),
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            updated_at=job.updated_at,
        )

    def document(self) -> dict[str, Any]:
        """The JSON-ready dict (what the API answers and what a callback POSTs)."""
        return self.model_dump(mode="json")


class JobPage(BaseModel):
    items: list[JobPublic]
    next_cursor: str | None


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
            last_error=ErrorInfo.of(row.last_error),
            started_at=row.started_at,
            finished_at=row.finished_at,
        )


class ReplayRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    steps: list[Annotated[str, Field(min_length=1, max_length=100)]] | None = Field(
        None, max_length=100, description="Steps to run again (default: every failed step)"
    )
