"""remote_attempts: what the service running an asynchronous HTTP report's attempt reported through its
attempt token (contact, progress, the outcome and the uploaded file), read by the worker holding the attempt

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27 02:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.core.sqltypes import UTCDateTime

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "remote_attempts",
        sa.Column("job_id", sa.String(length=26), nullable=False),
        sa.Column("replay", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("nonce", sa.String(length=26), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("seen_at", UTCDateTime(), nullable=False),
        sa.Column("progress", sa.Float(), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("output_path", sa.String(length=500), nullable=True),
        sa.Column("output_filename", sa.String(length=255), nullable=True),
        sa.Column("output_content_type", sa.String(length=100), nullable=True),
        sa.Column("output_size", sa.BigInteger(), nullable=True),
        sa.Column("output_rows", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["report_jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "replay", "attempt"),
    )


def downgrade() -> None:
    op.drop_table("remote_attempts")
