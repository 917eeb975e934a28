"""A worker SIGKILLed in the middle of a group commit, for real: the shared transaction is caught half done
(job rows already updated, the attempts' update waiting on a lock the test holds), then the worker dies."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.utils.jobs import get_attempts, parse_ts, submit_many, wait_job
from tests.utils.polling import eventually
from tests.utils.stack import Stack

pytestmark = pytest.mark.timeout(180)

JOBS = 24
ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")


async def test_sigkill_during_a_group_commit_loses_nothing_and_runs_nothing_twice(stack: Stack) -> None:
    stack.start_api()
    victim = stack.start_worker(WORKER_MAX_JOBS=JOBS)
    async with stack.client() as client:
        bodies = [{"report_type": "demo.sleep", "params": {"seconds": 1.5}}] * JOBS
        job_ids = await submit_many(client, None, bodies)
        await eventually(lambda: stack.status_counts().get("running") == JOBS, 20, "every job running", 0.05)

        # Jobs that started in one shared transaction carry the same started_at.
        started = Counter(stack.sql("SELECT started_at FROM report_jobs")[i][0] for i in range(JOBS))
        assert started.most_common(1)[0][1] >= 2, f"no two jobs started in one group commit: {started}"

        # Hold every attempt row, each in a transaction of its own: a success flush stops at its attempts
        # UPDATE, after it has already moved its jobs' rows to done, inside its still-open transaction. The
        # first job to finish may be flushed alone (its report started a moment before the others'): its row
        # is let go, until a flush of several jobs waits.
        holder = create_async_engine(stack.servers.db.url, pool_size=JOBS + 2)
        held: dict[str, Any] = {}
        try:
            for job_id in sorted(job_ids):
                conn = held[job_id] = await holder.connect()
                await conn.execute(
                    text("SELECT * FROM job_attempts WHERE job_id = :id FOR UPDATE"), {"id": job_id}
                )
            waiting = await a_flush_of_several_held_jobs(stack, held)
            # Its jobs' rows were already updated in the open transaction: committed, they are running.
            in_list = ", ".join(f"'{job_id}'" for job_id in waiting)
            assert stack.status_counts(f"id IN ({in_list})") == {"running": len(waiting)}
            # Successes behind it wait for it (one flush at a time): nothing more can commit.
            running = stack.sql("SELECT id FROM report_jobs WHERE status = 'running'")
            unrecorded = {row[0] for row in running}
            assert waiting <= unrecorded
            victim.kill()
        finally:
            for conn in held.values():
                await conn.rollback()
                await conn.close()
            await holder.dispose()

        stack.start_worker()
        stack.start_scheduler()
        jobs = [await wait_job(client, None, job_id, within_s=60) for job_id in job_ids]
        histories = {job_id: await get_attempts(client, None, job_id) for job_id in job_ids}

    assert [job["status"] for job in jobs] == ["done"] * JOBS, jobs
    for job_id, history in histories.items():
        outcomes = [attempt["outcome"] for attempt in history]
        # The killed transaction never committed: those jobs were still running attempt 1, which the stuck
        # scan declared lost; every other job kept its one committed success.
        assert outcomes in (["succeeded"], ["lost", "succeeded"]), (job_id, history)
        assert_no_overlap(history)
    # Exactly the jobs whose success was not committed ran again: the killed transaction's and those queued
    # behind it in the worker.
    assert {job_id for job_id, h in histories.items() if len(h) == 2} == unrecorded


async def a_flush_of_several_held_jobs(stack: Stack, held: dict[str, Any]) -> set[str]:
    """The jobs of an `UPDATE job_attempts` waiting on rows the test holds, once one names two or more of
    them and no other job. A statement naming one held job, or held jobs beside jobs already let go (it is
    not the flush we want, or is about to pass), gets its held rows let go so that it goes through."""
    while True:
        statements: list[set[str]] = await eventually(
            lambda: attempts_updates_naming(stack, set(held)),
            20,
            "a success flush waiting on a held attempt row",
            0.02,
        )
        for jobs in statements:
            if len(jobs) >= 2 and jobs <= set(held):
                return jobs
        let_go = {job_id for jobs in statements for job_id in jobs if job_id in held}
        for job_id in let_go:
            await held.pop(job_id).rollback()
        await eventually(lambda g=let_go: not attempts_updates_naming(stack, g), 20, "the flush to pass")


def attempts_updates_naming(stack: Stack, jobs: set[str]) -> list[set[str]]:
    """The job ids of each `UPDATE job_attempts` the server is running now that names one of `jobs`."""
    rows = stack.sql("SELECT info FROM information_schema.processlist WHERE info LIKE 'UPDATE job_attempts%'")
    named = [set(ULID.findall(row[0])) for row in rows]
    return [ids for ids in named if ids & jobs]


def assert_no_overlap(history: list[dict[str, Any]]) -> None:
    for earlier, later in itertools.pairwise(history):
        assert earlier["finished_at"] is not None, history
        assert parse_ts(earlier["finished_at"]) <= parse_ts(later["started_at"]), history
