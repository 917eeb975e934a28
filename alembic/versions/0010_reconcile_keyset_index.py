"""report_jobs (status, id): the reconciliation's keyset pages, one waiting status at a time, read a range of
this index (a page reads its own rows, whatever the backlog)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26 12:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.create_index("ix_report_jobs_status_id", ["status", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_report_jobs_status_id")
