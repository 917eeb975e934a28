"""The state gauges read the live-jobs index alone: the live statuses' entries, not one finished row, and no
row of the table (the oldest wait is the computed `eligible_at`, an index column)."""

from __future__ import annotations

from typing import Any

from app.core.db import session_scope
from app.core.states import JobStatus
from app.core.times import utcnow
from app.observability.repository import StateRepository
from tests.utils.bulk_jobs import insert_jobs
from tests.utils.job_lists import rows_read


async def test_the_gauges_read_as_many_index_entries_as_there_are_live_jobs_beside_20000_finished(
    env: Any,
) -> None:
    await insert_jobs(20_000, "acme", status=JobStatus.DONE)
    await insert_jobs(300, "acme", status=JobStatus.PENDING)
    await insert_jobs(50, "globex", "demo.sleep", status=JobStatus.RETRYING, next_attempt_at=utcnow())
    async with session_scope() as session:
        first = await rows_read(session)
        live = await StateRepository(session).live_jobs(utcnow())
        read = await rows_read(session) - first
    assert sorted((row.status, row.count) for row in live) == [("pending", 300), ("retrying", 50)]
    assert all(row.oldest_eligible_since is not None for row in live)
    assert read <= 350 + 10, read
