"""report_jobs: an index per job-list filter, each ending in the id (a page reads about as many entries as it
shows), `eligible_at`, a virtual column with the live-jobs index the state gauges read alone, and finished_minutes,
the console's throughput rolled up by minute

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.models import ELIGIBLE_AT_SQL, UTCDateTime

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = {
    "ix_report_jobs_tenant_status_id": ["tenant", "status", "id"],
    "ix_report_jobs_tenant_type_status_id": ["tenant", "report_type", "status", "id"],
    "ix_report_jobs_tenant_key_id": ["tenant", "ordering_key", "id"],
    "ix_report_jobs_live": ["status", "report_type", "tenant", "eligible_at"],
}


def upgrade() -> None:
    op.create_table(
        "finished_minutes",
        sa.Column("minute", UTCDateTime(), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("jobs", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("minute", "tenant", "status"),
    )
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("eligible_at", UTCDateTime(), sa.Computed(ELIGIBLE_AT_SQL, persisted=False))
        )
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        for name, columns in INDEXES.items():
            batch_op.create_index(name, columns, unique=False)


def downgrade() -> None:
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        for name in INDEXES:
            batch_op.drop_index(name)
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.drop_column("eligible_at")
    op.drop_table("finished_minutes")
