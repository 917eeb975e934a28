"""notice_digests: owners' notices to one destination gather in a digest (its newest one, named by its
notice_digest_slots row, while no sender leased it; due NOTICE_COALESCE_S after it opened, its notices fixed
once leased); report_deliveries.digest_id links a notice to the digest that carries it

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27 09:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.core.sqltypes import UTCDateTime

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "notice_digests",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("destination_id", sa.String(length=26), nullable=False),
        sa.Column("closed_at", UTCDateTime(), nullable=True),
        sa.Column("members", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("parts_sent", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", UTCDateTime(), nullable=False),
        sa.Column("lease_until", UTCDateTime(), nullable=True),
        sa.Column("lease_token", sa.String(length=26), nullable=True),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column("sent_at", UTCDateTime(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_notice_digests_due", "notice_digests", ["status", "next_attempt_at"])
    op.create_table(
        "notice_digest_slots",
        sa.Column("destination_id", sa.String(length=26), nullable=False),
        sa.Column("digest_id", sa.String(length=26), nullable=False),
        sa.PrimaryKeyConstraint("destination_id"),
    )
    # Every destination has its slot from the start (a stager only ever locks an existing row).
    op.execute("INSERT INTO notice_digest_slots (destination_id, digest_id) SELECT id, '' FROM destinations")
    op.add_column("report_deliveries", sa.Column("digest_id", sa.String(length=26), nullable=True))
    op.create_index("ix_report_deliveries_digest", "report_deliveries", ["digest_id"])


def downgrade() -> None:
    op.drop_index("ix_report_deliveries_digest", table_name="report_deliveries")
    op.drop_column("report_deliveries", "digest_id")
    op.drop_table("notice_digest_slots")
    op.drop_index("ix_notice_digests_due", table_name="notice_digests")
    op.drop_table("notice_digests")
