"""cancel request time on jobs and attempts

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

import app.models
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cancel_requested_at", app.models.UTCDateTime(), nullable=True))
    with op.batch_alter_table("job_attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cancel_requested_at", app.models.UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_attempts", schema=None) as batch_op:
        batch_op.drop_column("cancel_requested_at")
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.drop_column("cancel_requested_at")
