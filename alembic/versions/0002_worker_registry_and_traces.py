"""worker registry and trace context

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel

import app.models
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "worker_processes",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=26), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("host", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("version", sqlmodel.sql.sqltypes.AutoString(length=50), nullable=False),
        sa.Column("started_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("jobs_running", sa.Integer(), nullable=False),
        sa.Column("last_heartbeat_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("last_tick_at", app.models.UTCDateTime(), nullable=True),
        sa.Column("metrics_port", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("worker_processes", schema=None) as batch_op:
        batch_op.create_index(
            "ix_worker_processes_kind_heartbeat", ["kind", "last_heartbeat_at"], unique=False
        )
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("traceparent", sqlmodel.sql.sqltypes.AutoString(length=55), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.drop_column("traceparent")
    with op.batch_alter_table("worker_processes", schema=None) as batch_op:
        batch_op.drop_index("ix_worker_processes_kind_heartbeat")
    op.drop_table("worker_processes")
