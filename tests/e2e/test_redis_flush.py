"""Redis only carries work: flushing it loses no job (MySQL is the source of truth)."""

from __future__ import annotations

import pytest

from tests.utils.jobs import submit_many
from tests.utils.polling import eventually
from tests.utils.stack import Stack

pytestmark = pytest.mark.timeout(120)

JOBS = 300


async def test_flushall_with_worker_stopped_loses_none_of_300_jobs(stack: Stack) -> None:
    stack.start_api()
    stack.start_scheduler()
    async with stack.client() as client:
        bodies = [{"report_type": "demo.csv", "params": {"rows": 1}} for _ in range(JOBS)]
        ids = await submit_many(client, None, bodies, concurrency=16)
    assert len(set(ids)) == JOBS
    assert stack.status_counts() == {"pending": JOBS}

    queue = stack.redis_client()
    try:
        # A pending job older than STUCK_AFTER_S may also get a fresh "stale" message from the scheduler (on
        # a slow machine the 300 submits take longer than that): count jobs, not messages.
        def queued_jobs() -> set[str]:
            return {member.decode().split(":")[0] for member in queue.zrange("arq:queue", 0, -1)}

        assert queued_jobs() == set(ids)
        stack.servers.redis.flushall()
        assert queue.zcard("arq:queue") < JOBS  # emptied; the scheduler may already be putting jobs back

        # The scheduler puts back what MySQL says is due (checked before any worker can take one).
        await eventually(lambda: queued_jobs() == set(ids), 30, "the scheduler to re-enqueue every job")
    finally:
        queue.close()
    stack.start_worker()

    await eventually(lambda: stack.status_counts() == {"done": JOBS}, 90, f"all {JOBS} jobs done")
    per_job = stack.sql(
        "SELECT j.id, COUNT(a.id), SUM(a.outcome = 'succeeded') FROM report_jobs j "
        "LEFT JOIN job_attempts a ON a.job_id = j.id GROUP BY j.id"
    )
    assert sorted(row[0] for row in per_job) == sorted(ids)
    not_exactly_one = [row for row in per_job if row[1:] != ["1", "1"]]
    assert not_exactly_one == [], not_exactly_one
    assert stack.scalar("SELECT COUNT(*) FROM report_jobs WHERE attempt <> 1 OR attempts_total <> 1") == "0"


async def test_a_flushed_backlog_is_queued_again_long_before_the_next_tick(stack: Stack) -> None:
    stack.start_api()
    stack.start_scheduler(SCAN_INTERVAL_S="3600")  # its first tick runs at start, the next in an hour
    async with stack.client() as client:
        bodies = [{"report_type": "demo.csv", "params": {"rows": 1}} for _ in range(JOBS)]
        ids = await submit_many(client, None, bodies, concurrency=16)
    queue = stack.redis_client()
    try:

        def queued_jobs() -> set[str]:
            return {member.decode().split(":")[0] for member in queue.zrange("arq:queue", 0, -1)}

        await eventually(lambda: queued_jobs() == set(ids), 30, "every job queued")
        stack.servers.redis.flushall()
        # The scheduler's flush watch sees the walk's mark gone and walks every waiting job back now.
        await eventually(lambda: queued_jobs() == set(ids), 30, "the flush watch to re-enqueue every job")
    finally:
        queue.close()
    stack.start_worker()
    await eventually(lambda: stack.status_counts() == {"done": JOBS}, 90, f"all {JOBS} jobs done")
