"""destinations (a tenant's robots, mail servers, webhooks) and report_deliveries (the outbox of finished
reports and owners' notices to each destination), notify_routes; jobs and schedules take deliver_to, jobs
output_rows and keep_until, schedules notify_to, a deadline and keep_outputs_s, schedule runs deadline_at

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26 19:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.core.sqltypes import UTCDateTime

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "destinations",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("secrets", sa.JSON(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tenant", "name", name="uq_destinations_tenant_name"),
    )
    op.create_table(
        "report_deliveries",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("event", sa.String(length=16), nullable=False),
        sa.Column("subject", sa.String(length=120), nullable=False),
        sa.Column("job_id", sa.String(length=26), nullable=True),
        sa.Column("schedule_id", sa.String(length=26), nullable=True),
        sa.Column("facts", sa.JSON(), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("destination_id", sa.String(length=26), nullable=False),
        sa.Column("destination_name", sa.String(length=100), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("run", sa.Integer(), nullable=False),
        sa.Column("overrides", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", UTCDateTime(), nullable=False),
        sa.Column("lease_until", UTCDateTime(), nullable=True),
        sa.Column("lease_token", sa.String(length=26), nullable=True),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column("sent_at", UTCDateTime(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["report_jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("subject", "destination_id", name="uq_report_deliveries_subject_dest"),
    )
    op.create_index("ix_report_deliveries_due", "report_deliveries", ["status", "next_attempt_at"])
    op.create_index("ix_report_deliveries_job", "report_deliveries", ["job_id"])
    op.create_table(
        "notify_routes",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("report_type", sa.String(length=100), nullable=True),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("destination_ids", sa.JSON(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_notify_routes_tenant", "notify_routes", ["tenant", "report_type"])
    # Plain ALTERs, not a batch: SQLite (3.35+) adds and drops these columns in place, where a batch would
    # copy report_jobs with its computed column.
    op.add_column("report_jobs", sa.Column("deliver_to", sa.JSON(), nullable=True))
    op.add_column("report_jobs", sa.Column("output_rows", sa.Integer(), nullable=True))
    op.add_column("report_jobs", sa.Column("keep_until", UTCDateTime(), nullable=True))
    op.add_column("schedules", sa.Column("keep_outputs_s", sa.Integer(), nullable=True))
    op.add_column("schedules", sa.Column("deliver_to", sa.JSON(), nullable=True))
    op.add_column("schedules", sa.Column("notify_to", sa.JSON(), nullable=True))
    op.add_column("schedules", sa.Column("deadline", sa.String(length=5), nullable=True))
    op.add_column("schedule_runs", sa.Column("deadline_at", UTCDateTime(), nullable=True))
    op.create_index("ix_schedule_runs_deadline_at", "schedule_runs", ["deadline_at"])


def downgrade() -> None:
    op.drop_index("ix_schedule_runs_deadline_at", table_name="schedule_runs")
    op.drop_column("schedule_runs", "deadline_at")
    op.drop_column("schedules", "deadline")
    op.drop_column("schedules", "notify_to")
    op.drop_column("schedules", "deliver_to")
    op.drop_column("schedules", "keep_outputs_s")
    op.drop_column("report_jobs", "keep_until")
    op.drop_column("report_jobs", "output_rows")
    op.drop_column("report_jobs", "deliver_to")
    op.drop_index("ix_notify_routes_tenant", table_name="notify_routes")
    op.drop_table("notify_routes")
    op.drop_table("report_deliveries")  # with its indexes (MySQL keeps the job_id one while its FK stands)
    op.drop_table("destinations")
