"""The tables of destinations (a tenant's robots, mail servers and webhooks), of report deliveries (the outbox
of finished reports and owners' notices, one row a destination a subject), of the digests that carry the
notices, and of a tenant's notify routes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from app.core.sqltypes import UTCDateTime, str_enum
from app.core.states import DeliveryStatus
from app.core.times import utcnow


class Destination(SQLModel, table=True):
    """A tenant's named place to send reports and notices. `options` are shown; `secrets` (robot URLs with
    their tokens, signing secrets, SMTP passwords) are write-only: never returned, logged or rendered."""

    __tablename__ = "destinations"
    __table_args__ = (sa.UniqueConstraint("tenant", "name", name="uq_destinations_tenant_name"),)

    id: str = Field(primary_key=True, max_length=26)
    tenant: str = Field(max_length=64)
    name: str = Field(max_length=100)
    kind: str = Field(max_length=16)
    options: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON, nullable=False)
    secrets: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON, nullable=False)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


class ReportDelivery(SQLModel, table=True):
    """One message to one destination: a finished report (`event` report: one a job's run, `run` its replay
    count) or a notice to its owners (dead, late, missed). `subject` names what it is about, so one subject
    reaches a destination once (the unique key). Sent once: a sender leases the row (`lease_until`) before
    the send and records the answer within the lease."""

    __tablename__ = "report_deliveries"
    __table_args__ = (
        sa.UniqueConstraint("subject", "destination_id", name="uq_report_deliveries_subject_dest"),
        sa.Index("ix_report_deliveries_due", "status", "next_attempt_at"),
        sa.Index("ix_report_deliveries_job", "job_id"),
        sa.Index("ix_report_deliveries_created", "status", "created_at"),  # failing destinations, a day's
        sa.Index("ix_report_deliveries_digest", "digest_id"),
    )

    id: str = Field(primary_key=True, max_length=26)
    event: str = Field(default="report", max_length=16)  # report | dead | late | missed
    subject: str = Field(max_length=120)  # e.g. report:<job>:<run>, late:<schedule>:<fire>
    job_id: str | None = Field(default=None, max_length=26, foreign_key="report_jobs.id", ondelete="CASCADE")
    schedule_id: str | None = Field(default=None, max_length=26)
    facts: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON, nullable=False)
    tenant: str = Field(max_length=64)
    destination_id: str = Field(max_length=26)
    destination_name: str = Field(max_length=100)
    kind: str = Field(max_length=16)
    run: int = Field(default=0, nullable=False)
    overrides: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON, nullable=False)
    status: DeliveryStatus = Field(
        default=DeliveryStatus.PENDING,
        sa_type=str_enum(DeliveryStatus),
        nullable=False,
    )
    tries: int = Field(default=0, nullable=False)
    round: int = Field(default=0, nullable=False)  # a resend starts the next round (its own queue message)
    next_attempt_at: datetime = Field(sa_type=UTCDateTime, nullable=False)
    lease_until: datetime | None = Field(default=None, sa_type=UTCDateTime)
    lease_token: str | None = Field(default=None, max_length=26)  # the sender holding the lease
    last_error: str | None = Field(default=None, max_length=500)
    sent_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    # A notice goes out in its destination's digest (`notice_digests`): sent, tried and recorded with it.
    digest_id: str | None = Field(default=None, max_length=26)


class NoticeDigest(SQLModel, table=True):
    """The message that carries owners' notices to one destination. Notices staged while it is open join
    it; it is due NOTICE_COALESCE_S after it opened. A sender's lease closes it (`closed_at`): its notices
    are fixed from then on, so every try sends the same ones under the same key; the outcome is recorded on
    it and its notices at once."""

    __tablename__ = "notice_digests"
    __table_args__ = (sa.Index("ix_notice_digests_due", "status", "next_attempt_at"),)

    id: str = Field(primary_key=True, max_length=26)
    tenant: str = Field(max_length=64)
    destination_id: str = Field(max_length=26)
    closed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)  # leased: no notice joins any more
    members: int = Field(default=0, nullable=False)
    status: DeliveryStatus = Field(
        default=DeliveryStatus.PENDING, sa_type=str_enum(DeliveryStatus), nullable=False
    )
    tries: int = Field(default=0, nullable=False)
    parts_sent: int = Field(default=0, nullable=False)  # messages of the split digest accepted so far
    next_attempt_at: datetime = Field(sa_type=UTCDateTime, nullable=False)
    lease_until: datetime | None = Field(default=None, sa_type=UTCDateTime)
    lease_token: str | None = Field(default=None, max_length=26)
    last_error: str | None = Field(default=None, max_length=500)
    sent_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


class NoticeDigestSlot(SQLModel, table=True):
    """A destination's newest digest: the row a stager locks (by primary key) to find the open digest or to
    open the next one."""

    __tablename__ = "notice_digest_slots"

    destination_id: str = Field(primary_key=True, max_length=26)
    digest_id: str = Field(max_length=26)


class NotifyRoute(SQLModel, table=True):
    """A tenant's standing order: its jobs (of one report type, or all) that die or run slow are told to
    these destinations, beside the global alert sinks and a schedule's own `notify_to`."""

    __tablename__ = "notify_routes"
    __table_args__ = (sa.Index("ix_notify_routes_tenant", "tenant", "report_type"),)

    id: str = Field(primary_key=True, max_length=26)
    tenant: str = Field(max_length=64)
    report_type: str | None = Field(default=None, max_length=100)  # None: every report type
    events: list[str] = Field(default_factory=list, sa_type=sa.JSON, nullable=False)  # dead | slow
    destination_ids: list[str] = Field(default_factory=list, sa_type=sa.JSON, nullable=False)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
