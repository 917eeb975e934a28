"""Job rows written straight into MySQL, many at a time (a backlog of 100,000 in seconds, not through the
API): for what reads MySQL, such as the scheduler's reconciliation. No message is queued for them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import insert

from app.core.db import session_scope
from app.core.ids import new_id
from app.core.repository import insert_values, table_of
from app.core.states import JobStatus
from app.core.times import utcnow
from app.models import ReportJob

CHUNK_ROWS = 5000


async def insert_jobs(
    count: int,
    tenant: str = "acme",
    report_type: str = "demo.csv",
    status: JobStatus = JobStatus.PENDING,
    updated_at: datetime | None = None,
    **columns: Any,
) -> list[str]:
    """`count` jobs in `status` with new, increasing ids (a later call's jobs are newer); returns the ids."""
    stamp = updated_at or utcnow()
    template = insert_values(
        table_of(ReportJob),
        ReportJob(
            id="",
            tenant=tenant,
            report_type=report_type,
            params={"rows": 1},
            status=status,
            max_attempts=4,
            timeout_s=5.0,
            created_at=stamp,
            updated_at=stamp,
            **columns,
        ),
    )
    ids = [new_id() for _ in range(count)]
    ids.sort()  # ULIDs made in the same millisecond are not ordered by their random part
    for start in range(0, count, CHUNK_ROWS):
        rows = [{**template, "id": job_id} for job_id in ids[start : start + CHUNK_ROWS]]
        async with session_scope() as session:
            await session.execute(insert(table_of(ReportJob)), rows)
    return ids
