"""ordering keys decided by commit order: a per-key sequence taken under the key's row lock when a job is
inserted (report_jobs.ordering_seq, ordering_sequences), existing keyed jobs numbered by (created_at, id)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26 08:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NUMBER_MYSQL = """
UPDATE report_jobs AS j
JOIN (
    SELECT id, ROW_NUMBER() OVER (PARTITION BY tenant, ordering_key ORDER BY created_at, id) AS seq
    FROM report_jobs WHERE ordering_key IS NOT NULL
) AS numbered ON numbered.id = j.id
SET j.ordering_seq = numbered.seq
"""
_NUMBER_SQLITE = """
UPDATE report_jobs SET ordering_seq = (
    SELECT COUNT(*) FROM report_jobs AS p
    WHERE p.tenant = report_jobs.tenant AND p.ordering_key = report_jobs.ordering_key
      AND (p.created_at < report_jobs.created_at OR (p.created_at = report_jobs.created_at AND p.id <= report_jobs.id))
)
WHERE ordering_key IS NOT NULL
"""
_SEQUENCES = """
INSERT INTO ordering_sequences (tenant, ordering_key, last_seq)
SELECT tenant, ordering_key, MAX(ordering_seq) FROM report_jobs
WHERE ordering_key IS NOT NULL GROUP BY tenant, ordering_key
"""


def upgrade() -> None:
    op.create_table(
        "ordering_sequences",
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("ordering_key", sa.String(length=200), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "ordering_key"),
    )
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ordering_seq", sa.BigInteger(), nullable=True))
    op.execute(_NUMBER_SQLITE if op.get_bind().dialect.name == "sqlite" else _NUMBER_MYSQL)
    op.execute(_SEQUENCES)
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_report_jobs_ordering")
        batch_op.create_index("ix_report_jobs_ordering", ["tenant", "ordering_key", "ordering_seq"])


def downgrade() -> None:
    with op.batch_alter_table("report_jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_report_jobs_ordering")
        batch_op.create_index("ix_report_jobs_ordering", ["tenant", "ordering_key", "created_at"])
        batch_op.drop_column("ordering_seq")
    op.drop_table("ordering_sequences")
