"""A varied set of job rows for the job list's tests (tenants, types, statuses, ordering keys, schedules,
creation times over a day), written straight into MySQL, and the list's answers walked page by page.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncSession
from ulid import ULID

from app.core.db import session_scope
from app.core.repository import insert_values, table_of
from app.core.states import JobStatus
from app.core.times import utcnow
from app.jobs.list_repository import JobFilter, JobListRepository
from app.models import ReportJob

TENANTS = ("acme", "globex")
TYPES = ("demo.csv", "demo.sleep", "demo.fail", "sales.daily", "sales.rare")
KEYS = (None, None, None, "shop-1", "shop-2")
SCHEDULES = (None, None, "01JC0000000000000000000001", "01JC0000000000000000000002")


@dataclass(frozen=True)
class Row:
    id: str
    tenant: str
    report_type: str
    status: JobStatus
    ordering_key: str | None
    schedule_id: str | None
    created_at: Any


def varied_rows(count: int, seed: int) -> list[Row]:
    """`count` rows over the last day: each id made from its creation time, up to 2 s after it."""
    rng = random.Random(seed)
    start = utcnow() - timedelta(days=1)
    rows = []
    for _ in range(count):
        created = start + timedelta(seconds=rng.uniform(0, 86_000))
        job_id = str(ULID.from_timestamp((created + timedelta(seconds=rng.uniform(0, 2))).timestamp()))
        rows.append(
            Row(
                job_id,
                rng.choice(TENANTS),
                rng.choices(TYPES, weights=(40, 30, 20, 9, 1))[0],
                rng.choice(list(JobStatus)),
                rng.choice(KEYS),
                rng.choice(SCHEDULES),
                created,
            )
        )
    return rows


async def write_rows(rows: list[Row]) -> None:
    jobs = table_of(ReportJob)
    for start in range(0, len(rows), 5000):
        values = [
            insert_values(
                jobs,
                ReportJob(
                    id=row.id,
                    tenant=row.tenant,
                    report_type=row.report_type,
                    params={},
                    status=row.status,
                    max_attempts=4,
                    timeout_s=5.0,
                    ordering_key=row.ordering_key,
                    ordering_seq=1 if row.ordering_key else None,
                    schedule_id=row.schedule_id,
                    created_at=row.created_at,
                    updated_at=row.created_at,
                ),
            )
            for row in rows[start : start + 5000]
        ]
        async with session_scope() as session:
            await session.execute(insert(jobs), values)


def matches(row: Row, flt: JobFilter) -> bool:
    return (
        (flt.scope.tenant is None or row.tenant == flt.scope.tenant)
        and (not flt.statuses or row.status in flt.statuses)
        and (flt.report_type is None or row.report_type == flt.report_type)
        and (flt.ordering_key is None or row.ordering_key == flt.ordering_key)
        and (flt.schedule_id is None or row.schedule_id == flt.schedule_id)
        and (flt.id_prefix is None or row.id.startswith(flt.id_prefix))
        and (flt.created_after is None or row.created_at >= flt.created_after)
        and (flt.created_before is None or row.created_at < flt.created_before)
    )


async def walk(flt: JobFilter, limit: int, scan_rows: int) -> tuple[list[str], int]:
    """Every id the list shows for `flt`, following its cursors as a client does (`limit + 1` a request,
    as the API asks), and how many requests that took."""
    shown: list[str] = []
    before: str | None = None
    requests = 0
    while True:
        requests += 1
        async with session_scope() as session:
            page = await JobListRepository(session).page(flt, before, limit + 1, scan_rows)
        ids = [row.id for row in page.rows]
        shown += ids[:limit]
        if len(ids) > limit:
            before = ids[limit - 1]
        elif page.resume_before:
            before = page.resume_before
        else:
            return shown, requests


async def rows_read(session: AsyncSession) -> int:
    """Index entries and rows this connection has read so far (MariaDB's handler counters)."""
    result = await session.execute(text("SHOW SESSION STATUS LIKE 'Handler_read%'"))
    return sum(int(value) for _, value in result.all())
