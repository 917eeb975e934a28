"""The console's throughput chart reads minutes rolled up once they are over, and report_jobs only for the
last minute or two: the same counts as counting report_jobs, at a cost that does not grow with the hour's
finishes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from app.console import service as console
from app.console.repository import ConsoleRepository
from app.core.db import session_scope
from app.core.states import JobStatus
from app.core.tenancy import EVERY_TENANT, TenantScope
from app.core.times import utcnow
from tests.utils.bulk_jobs import insert_jobs
from tests.utils.job_lists import rows_read

MINUTES = 30
PER_MINUTE = 100


async def finished_over_half_an_hour() -> dict[str, tuple[int, int]]:
    """PER_MINUTE jobs ended in each of the last MINUTES minutes (a tenth dead, half of them acme's):
    the expected (done, dead) of acme by "HH:MM"."""
    now = utcnow()
    expected: dict[str, tuple[int, int]] = {}
    for ago in range(MINUTES):
        at = (now - timedelta(minutes=ago)).replace(second=30, microsecond=0)
        if at > now:
            continue
        for tenant in ("acme", "globex"):
            await insert_jobs(PER_MINUTE * 9 // 20, tenant, status=JobStatus.DONE, finished_at=at)
            await insert_jobs(PER_MINUTE // 20, tenant, status=JobStatus.DEAD, finished_at=at)
        expected[at.strftime("%H:%M")] = (PER_MINUTE * 9 // 20, PER_MINUTE // 20)
    return expected


async def test_the_chart_counts_what_report_jobs_holds_before_and_after_the_minutes_are_rolled_up(
    env: Any,
) -> None:
    expected = await finished_over_half_an_hour()
    before = await console.overview(TenantScope("acme"))  # rolls the minutes that are over up
    after = await console.overview(TenantScope("acme"))
    for overview in (before, after):
        shown = {label: (done, dead) for label, done, dead in overview.throughput if done or dead}
        assert shown == expected


async def test_reading_the_chart_reads_rolled_minutes_and_only_the_last_minutes_of_report_jobs(
    env: Any,
) -> None:
    await finished_over_half_an_hour()
    since = (utcnow() - timedelta(minutes=console.THROUGHPUT_MINUTES - 1)).replace(second=0, microsecond=0)
    async with session_scope() as session:
        first = await rows_read(session)
        await ConsoleRepository(session).finished_per_minute(EVERY_TENANT, since)
        unrolled = await rows_read(session) - first
    await console.roll_up_minutes(utcnow())
    async with session_scope() as session:
        first = await rows_read(session)
        await ConsoleRepository(session).finished_per_minute(EVERY_TENANT, since)
        rolled = await rows_read(session) - first
    assert unrolled >= MINUTES * PER_MINUTE * 2 * 0.9
    # The rolled minutes' keys (minutes x tenants x statuses) and at most three minutes of finishes, each
    # counted as an index entry and a row.
    assert rolled <= 2 * (MINUTES * 2 * 2 + 3 * 2 * PER_MINUTE), (rolled, unrolled)
