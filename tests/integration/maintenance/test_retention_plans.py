"""Retention's statements on a realistic table (MariaDB, 240,000 finished jobs with their attempts): a page
reads its own entries of the (status, finished_at) index and no more, wherever the walk is; the DELETE goes
by primary key; every table naming a job cascades with it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.dialects import mysql
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import ClauseElement, Executable

from app.core.db import session_scope
from app.core.states import JobStatus
from app.core.times import utcnow
from app.maintenance.repository import (
    JOB_CHILDREN,
    Expiry,
    MaintenanceRepository,
    RetentionEntry,
    retention_delete,
    retention_page_query,
)
from app.maintenance.service import PURGE_BATCH
from tests.utils.retention import empty_job_tables, insert_finished_jobs

EXPIRED = 120_000
RECENT = 120_000  # finished within retention: a walk that strayed past the cut-off would read them all


def sql_of(stmt: ClauseElement) -> str:
    return str(stmt.compile(dialect=mysql.dialect(), compile_kwargs={"literal_binds": True}))


async def explain(session: AsyncSession, stmt: ClauseElement) -> list[dict[str, Any]]:
    rows = await session.execute(text(f"EXPLAIN {sql_of(stmt)}"))
    return [dict(row._mapping) for row in rows]


async def rows_read(session: AsyncSession, stmt: Executable) -> int:
    """Index entries and rows the statement read (the session's handler counters, before and after)."""

    async def counters() -> int:
        status = await session.execute(text("SHOW SESSION STATUS LIKE 'Handler_read%'"))
        reads = {row[0]: row[1] for row in status}
        return sum(int(reads[name]) for name in ("Handler_read_key", "Handler_read_next"))

    before = await counters()
    await session.execute(stmt)
    return await counters() - before


async def test_a_page_reads_its_own_index_entries_wherever_the_walk_is(env: Any) -> None:
    now = utcnow()
    expiry = Expiry(finished_before=now - timedelta(hours=1), idempotent_before=now - timedelta(hours=1))
    start = now - timedelta(days=3)
    for chunk in range(0, EXPIRED, 40_000):  # 1 ms apart: the whole range lies before the cut-off
        await insert_finished_jobs(40_000, start + timedelta(seconds=40 * chunk // 40_000), spacing_us=1000)
    for _ in range(0, RECENT, 40_000):
        await insert_finished_jobs(40_000, now - timedelta(minutes=5))
    try:
        async with session_scope() as session:
            await session.execute(text("ANALYZE TABLE report_jobs, job_attempts, dead_letters"))
            repo = MaintenanceRepository(session)
            first = await repo.retention_page(JobStatus.DONE, expiry, None, PURGE_BATCH)
            middle = first[-1]
            for _ in range(30):  # a cursor 60,000 jobs into the walk
                middle = (await repo.retention_page(JobStatus.DONE, expiry, middle, PURGE_BATCH))[-1]
            last = await repo.retention_page(JobStatus.DONE, expiry, middle, EXPIRED)
            end = RetentionEntry(last[-100].id, last[-100].finished_at, True)  # 99 jobs before the cut-off

            for after in (None, middle, end):
                page = retention_page_query(JobStatus.DONE, expiry, after, PURGE_BATCH)
                plan = await explain(session, page)
                (derived,) = [step for step in plan if step["select_type"] == "DERIVED"]
                assert (derived["key"], derived["type"]) == ("ix_report_jobs_status_finished", "range"), plan
                assert "filesort" not in str(plan)
                # An index entry, the row by its key and a probe of the letters' index a job (about 3 reads
                # each): the page's jobs, not the table's 240,000 (the last page stops at the cut-off).
                assert await rows_read(session, page) <= 4 * PURGE_BATCH

            plan = await explain(session, retention_delete([entry.id for entry in first], expiry))
            assert (plan[0]["key"], plan[0]["type"]) == ("PRIMARY", "range"), plan
    finally:
        await empty_job_tables()


async def test_every_table_naming_a_job_goes_with_it_by_its_foreign_key(env: Any) -> None:
    async with session_scope() as session:
        rules = await session.execute(
            text(
                "SELECT TABLE_NAME, DELETE_RULE FROM information_schema.REFERENTIAL_CONSTRAINTS"
                " WHERE CONSTRAINT_SCHEMA = DATABASE() AND REFERENCED_TABLE_NAME = 'report_jobs'"
            )
        )
        cascades = {row[0]: row[1] for row in rules}
    # The children retention counts on, and dead letters (the reason a lettered job is never expired).
    assert cascades == dict.fromkeys([*(t.name for t in JOB_CHILDREN), "dead_letters"], "CASCADE")
