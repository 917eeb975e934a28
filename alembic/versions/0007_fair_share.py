"""fair share: job and schedule priority, tenant and report-type policies

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 23:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

import app.models
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("priority", sa.SmallInteger(), nullable=False, server_default="5"))
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.add_column(sa.Column("priority", sa.SmallInteger(), nullable=True))
    op.create_table(
        "tenant_policies",
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("weight", sa.Integer(), nullable=False),
        sa.Column("max_running", sa.Integer(), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("updated_at", app.models.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("tenant"),
    )
    op.create_table(
        "report_type_policies",
        sa.Column("report_type", sa.String(length=100), nullable=False),
        sa.Column("max_concurrency", sa.Integer(), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("updated_at", app.models.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("report_type"),
    )


def downgrade() -> None:
    op.drop_table("report_type_policies")
    op.drop_table("tenant_policies")
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.drop_column("priority")
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.drop_column("priority")
