"""dead letter resolution

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel

import app.models
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("dead_letters", schema=None) as batch_op:
        batch_op.add_column(sa.Column("resolved_at", app.models.UTCDateTime(), nullable=True))
        batch_op.add_column(
            sa.Column("resolved_by", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True)
        )
        batch_op.add_column(
            sa.Column("resolution", sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True)
        )
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("resolved_at", app.models.UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.drop_column("resolved_at")
    with op.batch_alter_table("dead_letters", schema=None) as batch_op:
        batch_op.drop_column("resolution")
        batch_op.drop_column("resolved_by")
        batch_op.drop_column("resolved_at")
