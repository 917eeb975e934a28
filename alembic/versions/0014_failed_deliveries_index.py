"""report_deliveries (status, created_at): the console's failing destinations read the failed deliveries of
the last day as an index range instead of every failed delivery ever kept

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27 09:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_report_deliveries_created", "report_deliveries", ["status", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_report_deliveries_created", table_name="report_deliveries")
