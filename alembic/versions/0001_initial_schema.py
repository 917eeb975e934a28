"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-23 04:30:33.172364
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel

import app.models
from alembic import op


revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=26), nullable=False),
        sa.Column("prefix", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("key_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("tenant", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("scopes", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
        sa.Column("created_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("revoked_at", app.models.UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key_hash"),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_keys_tenant"), ["tenant"], unique=False)

    op.create_table(
        "report_jobs",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=26), nullable=False),
        sa.Column("tenant", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("report_type", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "pending",
                "scheduled",
                "running",
                "retrying",
                "done",
                "dead",
                "cancelled",
                name="jobstatus",
                native_enum=False,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("timeout_s", sa.Float(), nullable=False),
        sa.Column("next_attempt_at", app.models.UTCDateTime(), nullable=True),
        sa.Column("run_at", app.models.UTCDateTime(), nullable=True),
        sa.Column("ordering_key", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("on_predecessor_dead", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("blocked_by", sqlmodel.sql.sqltypes.AutoString(length=26), nullable=True),
        sa.Column("callback_url", sqlmodel.sql.sqltypes.AutoString(length=2000), nullable=True),
        sa.Column(
            "callback_status",
            sa.Enum("pending", "delivered", "failed", name="callbackstatus", native_enum=False, length=16),
            nullable=True,
        ),
        sa.Column("callback_attempts", sa.Integer(), nullable=False),
        sa.Column("callback_last_error", sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
        sa.Column("progress", sa.Float(), nullable=True),
        sa.Column("last_error", sa.JSON(), nullable=True),
        sa.Column("output_path", sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
        sa.Column("output_filename", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
        sa.Column("output_content_type", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
        sa.Column("output_size", sa.BigInteger(), nullable=True),
        sa.Column("replay_count", sa.Integer(), nullable=False),
        sa.Column("attempts_total", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("request_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("worker", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("heartbeat_at", app.models.UTCDateTime(), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("created_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("started_at", app.models.UTCDateTime(), nullable=True),
        sa.Column("finished_at", app.models.UTCDateTime(), nullable=True),
        sa.Column("updated_at", app.models.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tenant", "idempotency_key", name="uq_report_jobs_tenant_idem"),
    )
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_report_jobs_ordering", ["tenant", "ordering_key", "created_at"], unique=False
        )
        batch_op.create_index("ix_report_jobs_status_finished", ["status", "finished_at"], unique=False)
        batch_op.create_index("ix_report_jobs_status_heartbeat", ["status", "heartbeat_at"], unique=False)
        batch_op.create_index("ix_report_jobs_status_next", ["status", "next_attempt_at"], unique=False)
        batch_op.create_index("ix_report_jobs_tenant_id", ["tenant", "id"], unique=False)

    op.create_table(
        "callback_deliveries",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=26), nullable=False),
        sa.Column("job_id", sqlmodel.sql.sqltypes.AutoString(length=26), nullable=False),
        sa.Column("tenant", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("url", sqlmodel.sql.sqltypes.AutoString(length=2000), nullable=False),
        sa.Column("event", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column(
            "status",
            sa.Enum("pending", "delivered", "failed", name="callbackstatus", native_enum=False, length=16),
            nullable=False,
        ),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("last_error", sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
        sa.Column("created_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("delivered_at", app.models.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["report_jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("callback_deliveries", schema=None) as batch_op:
        batch_op.create_index("ix_callback_deliveries_due", ["status", "next_attempt_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_callback_deliveries_job_id"), ["job_id"], unique=False)

    op.create_table(
        "dead_letters",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=26), nullable=False),
        sa.Column("job_id", sqlmodel.sql.sqltypes.AutoString(length=26), nullable=False),
        sa.Column("tenant", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("report_type", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("expire_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("archived_at", app.models.UTCDateTime(), nullable=True),
        sa.Column("replayed_at", app.models.UTCDateTime(), nullable=True),
        sa.Column(
            "alert_status",
            sa.Enum("pending", "sent", "failed", name="alertstatus", native_enum=False, length=16),
            nullable=False,
        ),
        sa.Column("alert_sent_at", app.models.UTCDateTime(), nullable=True),
        sa.Column("alert_attempts", sa.Integer(), nullable=False),
        sa.Column("alert_next_at", app.models.UTCDateTime(), nullable=True),
        sa.Column("alert_last_error", sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
        sa.Column("alert_message_id", sqlmodel.sql.sqltypes.AutoString(length=26), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["report_jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("dead_letters", schema=None) as batch_op:
        batch_op.create_index("ix_dead_letters_alert_sent_at", ["alert_sent_at"], unique=False)
        batch_op.create_index("ix_dead_letters_alert_status", ["alert_status"], unique=False)
        batch_op.create_index("ix_dead_letters_archived_at", ["archived_at"], unique=False)
        batch_op.create_index("ix_dead_letters_created_at", ["created_at"], unique=False)
        batch_op.create_index("ix_dead_letters_expire_at", ["expire_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_dead_letters_job_id"), ["job_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_dead_letters_report_type"), ["report_type"], unique=False)
        batch_op.create_index("ix_dead_letters_tenant_id", ["tenant", "id"], unique=False)

    op.create_table(
        "job_attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sqlmodel.sql.sqltypes.AutoString(length=26), nullable=False),
        sa.Column("replay", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("started_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("finished_at", app.models.UTCDateTime(), nullable=True),
        sa.Column(
            "outcome",
            sa.Enum(
                "running",
                "succeeded",
                "failed",
                "timed_out",
                "lost",
                "cancelled",
                "superseded",
                name="attemptoutcome",
                native_enum=False,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("worker", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["report_jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("job_attempts", schema=None) as batch_op:
        batch_op.create_index("ix_job_attempts_job", ["job_id", "replay", "attempt"], unique=False)

    op.create_table(
        "job_steps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sqlmodel.sql.sqltypes.AutoString(length=26), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("mode", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "pending", "running", "succeeded", "failed", name="stepstatus", native_enum=False, length=16
            ),
            nullable=False,
        ),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("rerun_allowed", sa.Boolean(), nullable=False),
        sa.Column("last_error", sa.JSON(), nullable=True),
        sa.Column("started_at", app.models.UTCDateTime(), nullable=True),
        sa.Column("finished_at", app.models.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["report_jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id", "name", name="uq_job_steps_job_name"),
    )
    op.create_table(
        "alert_deliveries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("letter_id", sqlmodel.sql.sqltypes.AutoString(length=26), nullable=False),
        sa.Column("sink", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column(
            "status",
            sa.Enum("pending", "sent", "failed", name="alertstatus", native_enum=False, length=16),
            nullable=False,
        ),
        sa.Column("message_id", sqlmodel.sql.sqltypes.AutoString(length=26), nullable=True),
        sa.Column("sent_at", app.models.UTCDateTime(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", app.models.UTCDateTime(), nullable=True),
        sa.Column("last_error", sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
        sa.Column("created_at", app.models.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["letter_id"], ["dead_letters.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("letter_id", "sink", name="uq_alert_deliveries_letter_sink"),
    )
    with op.batch_alter_table("alert_deliveries", schema=None) as batch_op:
        batch_op.create_index(
            "ix_alert_deliveries_sink_due", ["sink", "status", "next_attempt_at"], unique=False
        )
        batch_op.create_index("ix_alert_deliveries_sink_sent_at", ["sink", "sent_at"], unique=False)


def downgrade() -> None:
    # Dropping a table drops its indexes; dropping an FK-backing index first fails on MySQL.
    for table in (
        "alert_deliveries",
        "job_steps",
        "job_attempts",
        "dead_letters",
        "callback_deliveries",
        "report_jobs",
        "api_keys",
    ):
        op.drop_table(table)
