"""indexes for the state gauges: open dead letters, pending alerts by sink

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 18:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("dead_letters", schema=None) as batch_op:
        batch_op.create_index("ix_dead_letters_open", ["archived_at", "replayed_at"], unique=False)
        batch_op.drop_index("ix_dead_letters_archived_at")
    with op.batch_alter_table("alert_deliveries", schema=None) as batch_op:
        batch_op.create_index("ix_alert_deliveries_status_sink", ["status", "sink"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("alert_deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_alert_deliveries_status_sink")
    with op.batch_alter_table("dead_letters", schema=None) as batch_op:
        batch_op.create_index("ix_dead_letters_archived_at", ["archived_at"], unique=False)
        batch_op.drop_index("ix_dead_letters_open")
