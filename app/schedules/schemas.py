"""Wire schemas of schedules: ScheduleCreate and SchedulePatch in, SchedulePublic (with its next fire times),
SchedulePage, RunPublic and RunPage out.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.wire import IsoDateTime, Stamp
from app.destinations.schemas import DeliverTo
from app.models import Schedule, ScheduleRun
from app.schedules.timing import local

NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
DATE_PATTERN = r"^\d{4}-\d{2}-\d{2}$"
MAX_INTERVAL_S = 366 * 86400
MAX_EXCLUDE_DATES = 366
DELIVER_TO = "Destinations each fire's report goes to once it is done (names or ids of the tenant's own)"
NOTIFY_TO = "Destinations told when a fire's job dies, misses its deadline, or a fire is missed or skipped"
DEADLINE = "HH:MM in the schedule's zone: a fire's job not done by then (that day, else the next) is late"
DEADLINE_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
KEEP_OUTPUTS = "Keep each fire's job and file at least this long after the fire (beyond JOB_RETENTION_S)"
MAX_KEEP_S = 366 * 86400
DestinationRef = Annotated[str, Field(min_length=1, max_length=100)]

MissedRuns = Literal["skip", "run_once", "run_all"]
Overlap = Literal["skip", "queue", "allow"]
RunResult = Literal["submitted", "skipped"]

_EXAMPLE: dict[str, Any] = {
    "name": "daily-sales",
    "report_type": "demo.csv",
    "params": {"rows": 100},
    "cron": "0 8 * * *",
    "timezone": "Europe/Berlin",
}


class ScheduleCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [_EXAMPLE]})

    name: str = Field(pattern=NAME_PATTERN, description="A slug, unique per tenant")
    report_type: str = Field(min_length=1, max_length=100, description="A registered report type name")
    params: dict[str, Any] = Field(
        default_factory=dict, description="Checked against the type's params schema"
    )
    max_attempts: int | None = Field(None, ge=1, le=100, description="Overrides the type's attempt budget")
    callback_url: str | None = Field(None, min_length=1, max_length=2000, pattern=r"^https?://")
    deliver_to: list[DeliverTo] = Field(default_factory=list, max_length=10, description=DELIVER_TO)
    notify_to: list[DestinationRef] = Field(default_factory=list, max_length=10, description=NOTIFY_TO)
    deadline: str | None = Field(None, pattern=DEADLINE_PATTERN, description=DEADLINE)
    keep_outputs_s: int | None = Field(None, ge=60, le=MAX_KEEP_S, description=KEEP_OUTPUTS)
    ordering_key: str | None = Field(None, min_length=1, max_length=200)
    priority: int | None = Field(
        None,
        ge=0,
        le=9,
        strict=True,
        description="Its jobs' priority (0–9, higher first); null: the report type's, else 5",
    )
    cron: str | None = Field(
        None,
        min_length=1,
        max_length=120,
        description="5 fields, or 6 with seconds first; not with interval_s",
    )
    interval_s: float | None = Field(
        None, ge=1, le=MAX_INTERVAL_S, description="Fire every this many seconds; not with cron"
    )
    timezone: str = Field("UTC", min_length=1, max_length=64, description="IANA zone the cron is read in")
    start_at: IsoDateTime | None = Field(None, description="No fire before this (an interval counts from it)")
    end_at: IsoDateTime | None = Field(None, description="No fire after this")
    missed_runs: MissedRuns = Field("run_once", description="What fires missed while no scheduler ran do")
    max_catch_up: int = Field(10, ge=1, le=1000, description="With run_all: at most this many catch-up jobs")
    overlap: Overlap = Field("skip", description="A fire while the previous job is not terminal")
    exclude_dates: list[str] = Field(
        default_factory=list,
        max_length=1000,
        description=f"Dates (YYYY-MM-DD, in the schedule's zone) that never fire (≤ {MAX_EXCLUDE_DATES})",
    )
    paused: bool = False


class SchedulePatch(BaseModel):
    """Any field of ScheduleCreate; fields left out keep their value, `null` clears an optional one. Setting
    `cron` or `interval_s` alone switches the schedule to it (the other is cleared)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"cron": "0 9 * * 1-5"}]})

    name: str | None = Field(None, pattern=NAME_PATTERN)
    report_type: str | None = Field(None, min_length=1, max_length=100)
    params: dict[str, Any] | None = None
    max_attempts: int | None = Field(None, ge=1, le=100)
    callback_url: str | None = Field(None, min_length=1, max_length=2000, pattern=r"^https?://")
    deliver_to: list[DeliverTo] | None = Field(None, max_length=10, description=DELIVER_TO)
    notify_to: list[DestinationRef] | None = Field(None, max_length=10, description=NOTIFY_TO)
    deadline: str | None = Field(None, pattern=DEADLINE_PATTERN, description=DEADLINE)
    keep_outputs_s: int | None = Field(None, ge=60, le=MAX_KEEP_S, description=KEEP_OUTPUTS)
    ordering_key: str | None = Field(None, min_length=1, max_length=200)
    priority: int | None = Field(None, ge=0, le=9, strict=True)
    cron: str | None = Field(None, min_length=1, max_length=120)
    interval_s: float | None = Field(None, ge=1, le=MAX_INTERVAL_S)
    timezone: str | None = Field(None, min_length=1, max_length=64)
    start_at: IsoDateTime | None = None
    end_at: IsoDateTime | None = None
    missed_runs: MissedRuns | None = None
    max_catch_up: int | None = Field(None, ge=1, le=1000)
    overlap: Overlap | None = None
    exclude_dates: list[str] | None = Field(None, max_length=1000)
    paused: bool | None = None

    def changes(self) -> dict[str, Any]:
        """The fields the request named, with their values (None included: it clears)."""
        return {name: getattr(self, name) for name in self.model_fields_set}


class FireTime(BaseModel):
    utc: Stamp
    local: str = Field(description="The same instant in the schedule's zone, with its offset")

    @classmethod
    def of(cls, fire: datetime, tz_name: str) -> FireTime:
        return cls(utc=fire, local=local(fire, tz_name).isoformat())


class SchedulePublic(BaseModel):
    id: str
    name: str
    report_type: str
    params: dict[str, Any]
    max_attempts: int | None
    callback_url: str | None
    deliver_to: list[dict[str, Any]] = Field(description="Its jobs' destinations, by id, with their options")
    notify_to: list[str] = Field(description="Its owners' destinations (ids): dead, late and missed notices")
    deadline: str | None = Field(description="A fire's job is late when not done by this local time (HH:MM)")
    keep_outputs_s: int | None = Field(description=KEEP_OUTPUTS)
    ordering_key: str | None
    priority: int | None = Field(description="Its jobs' priority; null: the report type's (else 5)")
    cron: str | None
    interval_s: float | None
    timezone: str
    start_at: Stamp | None
    end_at: Stamp | None
    missed_runs: str
    max_catch_up: int
    overlap: str
    exclude_dates: list[str]
    paused: bool
    next_fire_times: list[FireTime] = Field(
        description="The next 5 fires that will submit a job (none while paused; excluded dates left out)"
    )
    last_fire_at: Stamp | None
    created_at: Stamp
    updated_at: Stamp

    @classmethod
    def of(cls, row: Schedule, next_fires: list[datetime]) -> SchedulePublic:
        return cls(
            id=row.id,
            name=row.name,
            report_type=row.report_type,
            params=row.params,
            max_attempts=row.max_attempts,
            callback_url=row.callback_url,
            deliver_to=row.deliver_to or [],
            notify_to=row.notify_to or [],
            deadline=row.deadline,
            keep_outputs_s=row.keep_outputs_s,
            ordering_key=row.ordering_key,
            priority=row.priority,
            cron=row.cron,
            interval_s=row.interval_s,
            timezone=row.timezone,
            start_at=row.start_at,
            end_at=row.end_at,
            missed_runs=row.missed_runs,
            max_catch_up=row.max_catch_up,
            overlap=row.overlap,
            exclude_dates=row.exclude_dates,
            paused=row.paused,
            next_fire_times=[FireTime.of(fire, row.timezone) for fire in next_fires],
            last_fire_at=row.last_fire_at,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


class SchedulePage(BaseModel):
    items: list[SchedulePublic]
    next_cursor: str | None


class RunPublic(BaseModel):
    fire_time: Stamp = Field(description="The nominal fire time, UTC (the trigger time for a manual run)")
    scheduled_for: str = Field(description="fire_time in the schedule's zone, with its offset")
    job_id: str | None
    result: RunResult
    reason: str | None = Field(description="For skipped: missed | overlap | excluded_date | paused")
    manual: bool
    created_at: Stamp

    @classmethod
    def of(cls, row: ScheduleRun, tz_name: str) -> RunPublic:
        return cls(
            fire_time=row.fire_time,
            scheduled_for=local(row.fire_time, tz_name).isoformat(),
            job_id=row.job_id,
            result=row.result,
            reason=row.reason,
            manual=row.manual,
            created_at=row.created_at,
        )


class RunPage(BaseModel):
    items: list[RunPublic]
    next_cursor: str | None
