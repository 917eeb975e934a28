"""SQLModel tables: report jobs, their attempts, dead letters, API keys and the live worker registry.

Datetimes are stored as naive UTC with microseconds and always come back timezone-aware.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import configure_mappers
from sqlmodel import Field, SQLModel

from app.core.sqltypes import UTCDateTime, str_enum
from app.core.states import AlertStatus, AttemptOutcome, CallbackStatus, JobStatus, StepStatus
from app.core.times import utcnow
from app.models.counters import FinishedMinute, OpenLetterCount
from app.models.destinations import (
    Destination,
    NoticeDigest,
    NoticeDigestSlot,
    NotifyRoute,
    ReportDelivery,
)
from app.models.remote_attempts import RemoteAttempt


def _ts(nullable: bool = True, index: bool = False) -> Any:
    return Field(default=None, sa_type=UTCDateTime, nullable=nullable, index=index)


ELIGIBLE_AT_SQL = (
    "CASE WHEN blocked_by IS NOT NULL THEN NULL"
    " WHEN status = 'retrying' THEN next_attempt_at"
    " WHEN status = 'scheduled' THEN run_at"
    " WHEN status = 'pending' THEN"
    " CASE WHEN run_at IS NOT NULL AND run_at > updated_at THEN run_at ELSE updated_at END"
    " ELSE NULL END"
)


class ReportJob(SQLModel, table=True):
    __tablename__ = "report_jobs"
    __table_args__ = (
        sa.UniqueConstraint("tenant", "idempotency_key", name="uq_report_jobs_tenant_idem"),
        sa.Index("ix_report_jobs_tenant_id", "tenant", "id"),
        sa.Index("ix_report_jobs_status_next", "status", "next_attempt_at"),
        # Reconciliation's keyset pages: one waiting status, in id order (app/maintenance/reconcile.py).
        sa.Index("ix_report_jobs_status_id", "status", "id"),
        sa.Index("ix_report_jobs_status_heartbeat", "status", "heartbeat_at"),
        sa.Index("ix_report_jobs_status_finished", "status", "finished_at"),
        sa.Index("ix_report_jobs_ordering", "tenant", "ordering_key", "ordering_seq"),
        # The job list: each filter a range that ends in the id (app/jobs/list_repository.py).
        sa.Index("ix_report_jobs_tenant_status_id", "tenant", "status", "id"),
        sa.Index("ix_report_jobs_tenant_type_status_id", "tenant", "report_type", "status", "id"),
        sa.Index("ix_report_jobs_tenant_key_id", "tenant", "ordering_key", "id"),
        # The state gauges: live statuses' entries alone, counted and their oldest wait read off the index.
        sa.Index("ix_report_jobs_live", "status", "report_type", "tenant", "eligible_at"),
    )

    id: str = Field(primary_key=True, max_length=26)
    tenant: str = Field(max_length=64)
    report_type: str = Field(max_length=100)
    params: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON, nullable=False)
    status: JobStatus = Field(sa_type=str_enum(JobStatus), nullable=False)
    attempt: int = Field(default=0, nullable=False)
    max_attempts: int = Field(nullable=False)
    timeout_s: float = Field(nullable=False)
    next_attempt_at: datetime | None = _ts()
    run_at: datetime | None = _ts()
    ordering_key: str | None = Field(default=None, max_length=200)
    # The job's place on its ordering key: taken from `OrderingSequence` in the transaction that inserts the
    # job, under that row's lock, so a lower number always committed first (commit order, not a clock).
    ordering_seq: int | None = Field(default=None, sa_type=sa.BigInteger)
    # 0-9, higher first (app.fairshare); kept by retries and replays.
    priority: int = Field(default=5, sa_type=sa.SmallInteger, nullable=False)
    # What a dead predecessor (same ordering_key, submitted earlier) means for this job: "wait" or "continue".
    on_predecessor_dead: str = Field(default="wait", max_length=16)
    blocked_by: str | None = Field(default=None, max_length=26)
    # Computed by the database (never written): when the job became free to start, NULL when it is not
    # waiting or waits for an ordering predecessor (app.jobs.waiting.eligible_since is its Python twin).
    eligible_at: datetime | None = Field(
        default=None, sa_column=sa.Column(UTCDateTime, sa.Computed(ELIGIBLE_AT_SQL, persisted=False))
    )
    callback_url: str | None = Field(default=None, max_length=2000)
    # Where a `done` job is delivered: [{"destination_id", "recipients", "title", "skip_when_empty"}].
    deliver_to: list[dict[str, Any]] | None = Field(default=None, sa_type=sa.JSON)
    output_rows: int | None = Field(default=None)  # rows the report said it wrote (ctx.set_rows)
    keep_until: datetime | None = _ts()  # retention keeps the job (and its file) at least until then
    # Mirror of the latest completion-callback delivery (the outbox row is the truth).
    callback_status: CallbackStatus | None = Field(default=None, sa_type=str_enum(CallbackStatus))
    callback_attempts: int = Field(default=0, nullable=False)
    callback_last_error: str | None = Field(default=None, max_length=500)
    progress: float | None = Field(default=None)
    last_error: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON)
    output_path: str | None = Field(default=None, max_length=500)
    output_filename: str | None = Field(default=None, max_length=255)
    output_content_type: str | None = Field(default=None, max_length=100)
    output_size: int | None = Field(default=None, sa_type=sa.BigInteger)
    replay_count: int = Field(default=0, nullable=False)
    attempts_total: int = Field(default=0, nullable=False)
    idempotency_key: str | None = Field(default=None, max_length=200)
    request_hash: str | None = Field(default=None, max_length=64)
    worker: str | None = Field(default=None, max_length=200)
    heartbeat_at: datetime | None = _ts()
    # A cancel asked while running (or a waiting job's cancel): kept once the job ends, so a `done` job still
    # tells that a request came too late; cleared by a replay. `_at` is the first request's time.
    cancel_requested: bool = Field(default=False, nullable=False)
    cancel_requested_at: datetime | None = _ts()
    # Set on jobs a schedule made: which schedule, and the nominal fire time the report is "for".
    schedule_id: str | None = Field(default=None, max_length=26, index=True)
    scheduled_for: datetime | None = _ts()
    # W3C traceparent of the submit span when tracing is on: attempts, alerts and callbacks join its trace.
    traceparent: str | None = Field(default=None, max_length=55)
    # Set (while `dead`) once an operator resolved its dead letter by hand: it no longer blocks its key.
    resolved_at: datetime | None = _ts()
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    started_at: datetime | None = _ts()
    finished_at: datetime | None = _ts()
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


class OrderingSequence(SQLModel, table=True):
    """The last place handed out on a (tenant, ordering key): the row a keyed insert locks and bumps."""

    __tablename__ = "ordering_sequences"

    tenant: str = Field(primary_key=True, max_length=64)
    ordering_key: str = Field(primary_key=True, max_length=200)
    last_seq: int = Field(sa_type=sa.BigInteger, nullable=False)


class JobAttempt(SQLModel, table=True):
    __tablename__ = "job_attempts"
    # Not unique: an attempt handed back at shutdown (superseded) is retried under the same number.
    __table_args__ = (sa.Index("ix_job_attempts_job", "job_id", "replay", "attempt"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(max_length=26, foreign_key="report_jobs.id", ondelete="CASCADE")
    replay: int = Field(default=0, nullable=False)
    attempt: int = Field(nullable=False)
    started_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    finished_at: datetime | None = _ts()
    outcome: AttemptOutcome = Field(sa_type=str_enum(AttemptOutcome), nullable=False)
    error: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON)
    worker: str | None = Field(default=None, max_length=200)
    # When a cancel of the job was asked while this attempt ran (written by the cancel itself, so finishing an
    # attempt costs no statement more): with outcome succeeded, failed or timed_out, the run finished first.
    cancel_requested_at: datetime | None = _ts()


class JobStep(SQLModel, table=True):
    """One step of a multi-step report: its outcome survives retries and replays."""

    __tablename__ = "job_steps"
    __table_args__ = (sa.UniqueConstraint("job_id", "name", name="uq_job_steps_job_name"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(max_length=26, foreign_key="report_jobs.id", ondelete="CASCADE")
    position: int = Field(nullable=False)
    name: str = Field(max_length=100)
    mode: str = Field(max_length=16)  # auto | manual
    status: StepStatus = Field(default=StepStatus.PENDING, sa_type=str_enum(StepStatus), nullable=False)
    attempts: int = Field(default=0, nullable=False)
    # A manual step runs automatically once; an operator's replay allows one more run.
    rerun_allowed: bool = Field(default=False, nullable=False)
    last_error: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON)
    started_at: datetime | None = _ts()
    finished_at: datetime | None = _ts()


class DeadLetter(SQLModel, table=True):
    __tablename__ = "dead_letters"
    __table_args__ = (
        sa.Index("ix_dead_letters_tenant_id", "tenant", "id"),
        sa.Index("ix_dead_letters_alert_status", "alert_status"),
        sa.Index("ix_dead_letters_expire_at", "expire_at"),
        # Open letters (neither archived nor replayed): the console and the metrics count them.
        sa.Index("ix_dead_letters_open", "archived_at", "replayed_at"),
        sa.Index("ix_dead_letters_alert_sent_at", "alert_sent_at"),
        sa.Index("ix_dead_letters_created_at", "created_at"),
    )

    id: str = Field(primary_key=True, max_length=26)
    job_id: str = Field(max_length=26, foreign_key="report_jobs.id", ondelete="CASCADE", index=True)
    tenant: str = Field(max_length=64)
    report_type: str = Field(max_length=100, index=True)
    params: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON, nullable=False)
    error: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON)
    attempts: int = Field(nullable=False)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    expire_at: datetime = Field(sa_type=UTCDateTime, nullable=False)
    archived_at: datetime | None = _ts()
    replayed_at: datetime | None = _ts()
    # An operator fixed the job's effect by hand: when, who (API key and tenant) and why. Archived too.
    resolved_at: datetime | None = _ts()
    resolved_by: str | None = Field(default=None, max_length=255)
    resolution: str | None = Field(default=None, max_length=500)
    alert_status: AlertStatus = Field(
        default=AlertStatus.PENDING, sa_type=str_enum(AlertStatus), nullable=False
    )
    alert_sent_at: datetime | None = _ts()
    alert_attempts: int = Field(default=0, nullable=False)
    alert_next_at: datetime | None = _ts()
    alert_last_error: str | None = Field(default=None, max_length=500)
    # One id per message sent to a sink: a digest shares it among the letters it names.
    alert_message_id: str | None = Field(default=None, max_length=26)


class ApiKey(SQLModel, table=True):
    __tablename__ = "api_keys"

    id: str = Field(primary_key=True, max_length=26)
    prefix: str = Field(max_length=16)
    key_hash: str = Field(max_length=64, unique=True)
    tenant: str = Field(max_length=64, index=True)
    scopes: str = Field(max_length=200)
    name: str | None = Field(default=None, max_length=100)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    revoked_at: datetime | None = _ts()


class CallbackDelivery(SQLModel, table=True):
    """Completion-callback outbox: written with the job's terminal transition, delivered until 2xx."""

    __tablename__ = "callback_deliveries"
    __table_args__ = (sa.Index("ix_callback_deliveries_due", "status", "next_attempt_at"),)

    id: str = Field(primary_key=True, max_length=26)
    job_id: str = Field(max_length=26, foreign_key="report_jobs.id", ondelete="CASCADE", index=True)
    tenant: str = Field(max_length=64)
    url: str = Field(max_length=2000)
    event: str = Field(max_length=32)
    payload: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON, nullable=False)
    status: CallbackStatus = Field(
        default=CallbackStatus.PENDING, sa_type=str_enum(CallbackStatus), nullable=False
    )
    attempts: int = Field(default=0, nullable=False)
    next_attempt_at: datetime = Field(sa_type=UTCDateTime, nullable=False)
    last_error: str | None = Field(default=None, max_length=500)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    delivered_at: datetime | None = _ts()


class AlertDelivery(SQLModel, table=True):
    """One dead letter's alert through one sink (dingtalk, feishu, webhook, log).

    Each sink has its own retries, backoff and per-window budget; the letter's `alert_status` becomes `sent`
    once every configured sink accepted a message naming it. A digest shares its `message_id` among letters.
    """

    __tablename__ = "alert_deliveries"
    __table_args__ = (
        sa.UniqueConstraint("letter_id", "sink", name="uq_alert_deliveries_letter_sink"),
        sa.Index("ix_alert_deliveries_sink_due", "sink", "status", "next_attempt_at"),
        sa.Index("ix_alert_deliveries_sink_sent_at", "sink", "sent_at"),
        sa.Index("ix_alert_deliveries_status_sink", "status", "sink"),
    )

    id: int | None = Field(default=None, primary_key=True)
    letter_id: str = Field(max_length=26, foreign_key="dead_letters.id", ondelete="CASCADE")
    sink: str = Field(max_length=32)
    status: AlertStatus = Field(default=AlertStatus.PENDING, sa_type=str_enum(AlertStatus), nullable=False)
    message_id: str | None = Field(default=None, max_length=26)
    sent_at: datetime | None = _ts()
    attempts: int = Field(default=0, nullable=False)
    next_attempt_at: datetime | None = _ts()
    last_error: str | None = Field(default=None, max_length=500)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


class WorkerProcess(SQLModel, table=True):
    """A running worker, dead-letter consumer or scheduler as it announced itself, refreshed every
    WORKER_HEARTBEAT_S: a row whose heartbeat is older than 1.5 beats belongs to a process that is gone."""

    __tablename__ = "worker_processes"
    __table_args__ = (sa.Index("ix_worker_processes_kind_heartbeat", "kind", "last_heartbeat_at"),)

    id: str = Field(primary_key=True, max_length=26)
    name: str = Field(max_length=200)
    kind: str = Field(max_length=32)
    host: str = Field(max_length=255)
    pid: int = Field(nullable=False)
    version: str = Field(max_length=50)
    started_at: datetime = Field(sa_type=UTCDateTime, nullable=False)
    concurrency: int = Field(default=0, nullable=False)
    jobs_running: int = Field(default=0, nullable=False)
    last_heartbeat_at: datetime = Field(sa_type=UTCDateTime, nullable=False)
    last_tick_at: datetime | None = _ts()
    metrics_port: int | None = Field(default=None)


class Schedule(SQLModel, table=True):
    """A recurring report: cron (5 or 6 fields) or a fixed interval, in an IANA time zone. `next_fire_at` is
    the next nominal fire (UTC) the scheduler will act on; NULL once past `end_at`."""

    __tablename__ = "schedules"
    __table_args__ = (
        sa.UniqueConstraint("tenant", "name", name="uq_schedules_tenant_name"),
        sa.Index("ix_schedules_due", "paused", "next_fire_at"),
        sa.Index("ix_schedules_tenant_id", "tenant", "id"),
    )

    id: str = Field(primary_key=True, max_length=26)
    tenant: str = Field(max_length=64)
    name: str = Field(max_length=64)
    report_type: str = Field(max_length=100)
    params: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON, nullable=False)
    max_attempts: int | None = Field(default=None)
    callback_url: str | None = Field(default=None, max_length=2000)
    deliver_to: list[dict[str, Any]] | None = Field(default=None, sa_type=sa.JSON)  # as the job's
    notify_to: list[str] | None = Field(default=None, sa_type=sa.JSON)  # owners: destination ids
    keep_outputs_s: int | None = Field(default=None)  # its jobs kept at least this long after their fire
    deadline: str | None = Field(default=None, max_length=5)  # "HH:MM" local: a fire's job done by then
    ordering_key: str | None = Field(default=None, max_length=200)
    priority: int | None = Field(default=None, sa_type=sa.SmallInteger)  # None: the report type's
    cron: str | None = Field(default=None, max_length=120)
    interval_s: float | None = Field(default=None)
    timezone: str = Field(default="UTC", max_length=64)
    start_at: datetime | None = _ts()
    end_at: datetime | None = _ts()
    missed_runs: str = Field(default="run_once", max_length=16)
    max_catch_up: int = Field(default=10, nullable=False)
    overlap: str = Field(default="skip", max_length=16)
    exclude_dates: list[str] = Field(default_factory=list, sa_type=sa.JSON, nullable=False)
    paused: bool = Field(default=False, nullable=False)
    next_fire_at: datetime | None = _ts()
    last_fire_at: datetime | None = _ts()
    last_job_id: str | None = Field(default=None, max_length=26)
    # Bumped by each change made through the API (patch, pause, resume), which compare-and-sets on it.
    version: int = Field(default=0, nullable=False)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


class ScheduleRun(SQLModel, table=True):
    """What one fire time of a schedule did: submitted a job, or skipped (missed, overlap, excluded_date).

    The unique key on (schedule_id, fire_time) is what makes a fire happen once, whatever the replicas."""

    __tablename__ = "schedule_runs"
    __table_args__ = (
        sa.UniqueConstraint("schedule_id", "fire_time", name="uq_schedule_runs_fire"),
        sa.Index("ix_schedule_runs_schedule_id", "schedule_id", "id"),
        sa.Index("ix_schedule_runs_deadline_at", "deadline_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    schedule_id: str = Field(max_length=26, foreign_key="schedules.id", ondelete="CASCADE")
    fire_time: datetime = Field(sa_type=UTCDateTime, nullable=False)
    job_id: str | None = Field(default=None, max_length=26)
    result: str = Field(max_length=16)  # submitted | skipped
    reason: str | None = Field(default=None, max_length=16)  # missed | overlap | excluded_date | paused
    manual: bool = Field(default=False, nullable=False)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    deadline_at: datetime | None = _ts()  # the job's deadline, cleared once checked (app.destinations)


class TenantPolicy(SQLModel, table=True):
    """A tenant's share of the workers (app.fairshare): weight, running cap, pause. No row: the defaults."""

    __tablename__ = "tenant_policies"

    tenant: str = Field(primary_key=True, max_length=64)
    weight: int = Field(default=1, nullable=False)
    max_running: int | None = Field(default=None)  # None: TENANT_MAX_RUNNING
    paused: bool = Field(default=False, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


class ReportTypePolicy(SQLModel, table=True):
    """An operator's override of a report type's concurrency cap, and its pause (app.fairshare)."""

    __tablename__ = "report_type_policies"

    report_type: str = Field(primary_key=True, max_length=100)
    max_concurrency: int | None = Field(default=None)  # None: the setting, else what the type declares
    paused: bool = Field(default=False, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


# Defined beside, re-exported with every other table.
__all__ = [
    "Destination",
    "FinishedMinute",
    "NoticeDigest",
    "NoticeDigestSlot",
    "NotifyRoute",
    "OpenLetterCount",
    "RemoteAttempt",
    "ReportDelivery",
]

# Rows built with model_construct (app/jobs/building.py) are read before any query would have configured
# the ORM's mappers in a fresh process: configure them once, now that every model is defined.
configure_mappers()
