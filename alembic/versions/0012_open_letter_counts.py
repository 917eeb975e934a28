"""open_letter_counts: the open dead letters by tenant, kept by the transitions that open and close a letter
(the gauges and the console read a row a tenant instead of every open letter); seeded from the letters

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 19:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "open_letter_counts",
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("letters", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("tenant"),
    )
    op.execute(
        "INSERT INTO open_letter_counts (tenant, letters) SELECT tenant, count(*) FROM dead_letters"
        " WHERE archived_at IS NULL AND replayed_at IS NULL GROUP BY tenant"
    )


def downgrade() -> None:
    op.drop_table("open_letter_counts")
