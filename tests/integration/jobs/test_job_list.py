"""The job list reads along an index per filter: every filter, alone or combined, walks exactly the jobs a
plain filter finds (each once, newest first), and a page reads a bounded number of rows whatever the table
holds, including a filter that matches nothing."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from app.core.db import session_scope
from app.core.states import JobStatus
from app.core.tenancy import EVERY_TENANT, TenantScope
from app.core.times import utcnow
from app.jobs.list_repository import JobFilter, JobListRepository
from tests.utils.bulk_jobs import insert_jobs
from tests.utils.job_lists import (
    KEYS,
    SCHEDULES,
    TENANTS,
    TYPES,
    matches,
    rows_read,
    varied_rows,
    walk,
    write_rows,
)

SEED = 28


def random_filter(rng: random.Random, rows: list[Any]) -> JobFilter:
    pick = rng.random
    anchor = rng.choice(rows)
    return JobFilter(
        scope=TenantScope(rng.choice(TENANTS)) if pick() < 0.7 else EVERY_TENANT,
        statuses=tuple(rng.sample(list(JobStatus), rng.randint(1, 3))) if pick() < 0.5 else (),
        report_type=rng.choice((*TYPES, "no.such.type")) if pick() < 0.4 else None,
        ordering_key=rng.choice([k for k in KEYS if k]) if pick() < 0.2 else None,
        schedule_id=rng.choice([s for s in SCHEDULES if s]) if pick() < 0.15 else None,
        id_prefix=anchor.id[: rng.randint(6, 9)] if pick() < 0.15 else None,
        created_after=anchor.created_at - timedelta(hours=rng.uniform(0, 6)) if pick() < 0.3 else None,
        created_before=anchor.created_at + timedelta(seconds=rng.uniform(-3, 3)) if pick() < 0.3 else None,
    )


async def test_every_filter_alone_or_combined_walks_exactly_the_jobs_it_matches_newest_first(
    env: Any,
) -> None:
    rng = random.Random(SEED)
    rows = varied_rows(3000, SEED)
    await write_rows(rows)
    for _ in range(80):
        flt = random_filter(rng, rows)
        limit, scan_rows = rng.choice((1, 3, 7, 50)), rng.choice((5, 40, 2000))
        shown, _ = await walk(flt, limit, scan_rows)
        expected = sorted((row.id for row in rows if matches(row, flt)), reverse=True)
        assert shown == expected, (flt, limit, scan_rows)


async def test_a_filter_no_index_serves_goes_on_from_where_its_bounded_scan_stopped(env: Any) -> None:
    rows = varied_rows(600, SEED)
    await write_rows(rows)
    # Every tenant's jobs of one type: no index leads with the type alone, so each page scans 20 ids.
    flt = JobFilter(EVERY_TENANT, report_type="sales.rare")
    shown, requests = await walk(flt, limit=5, scan_rows=20)
    assert shown == sorted((row.id for row in rows if row.report_type == "sales.rare"), reverse=True)
    assert requests >= len(rows) // 20


async def test_a_page_reads_about_as_many_rows_as_it_shows_whatever_the_tenant_holds(env: Any) -> None:
    await insert_jobs(20_000, tenant="big", report_type="common", status=JobStatus.DONE)
    await insert_jobs(200, tenant="big", report_type="rare", status=JobStatus.DONE)
    await insert_jobs(5_000, tenant="big", report_type="common", status=JobStatus.CANCELLED)
    await insert_jobs(10_000, tenant="other", report_type="rare", status=JobStatus.DONE)
    big = TenantScope("big")
    filters = {
        "first page": JobFilter(big),
        "status=done": JobFilter(big, statuses=(JobStatus.DONE,)),
        "status=pending (none)": JobFilter(big, statuses=(JobStatus.PENDING,)),
        "report_type=rare (1 %)": JobFilter(big, report_type="rare"),
        "report_type matching nothing": JobFilter(big, report_type="no.such.type"),
        "type and two statuses": JobFilter(
            big, report_type="common", statuses=(JobStatus.DONE, JobStatus.DEAD)
        ),
        "created in a past hour": JobFilter(big, created_before=utcnow() - timedelta(hours=3)),
    }
    read: dict[str, int] = {}
    for name, flt in filters.items():
        async with session_scope() as session:
            before = await rows_read(session)
            page = await JobListRepository(session).page(flt, None, 51)
            read[name] = (
                await rows_read(session) - before - (await rows_read(session) - await rows_read(session))
            )
            assert len(page.rows) <= 51
    # The page's index entries and its rows (a range per status: one more entry each where it ends).
    assert all(n <= 2 * 51 + len(JobStatus) for n in read.values()), read
