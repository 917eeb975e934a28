"""Group commit against real MariaDB: starts and successes that arrive together share one transaction, and
each job is still decided alone (a loser never fails its neighbours)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.attempts import group_commit, service
from app.core.config import get_settings
from app.core.db import session_scope
from app.core.states import AttemptOutcome
from tests.utils.jobs import get_attempts, get_job, submit_many

WORKER = "host:1"


async def submit(client: httpx.AsyncClient, auth: dict[str, str], count: int) -> list[str]:
    return await submit_many(client, auth, [{"report_type": "demo.csv", "params": {"rows": 1}}] * count)


async def start_all(job_ids: list[str]) -> list[Any]:
    return list(await asyncio.gather(*(group_commit.start_attempt(job_id, WORKER) for job_id in job_ids)))


async def attempt_rows(job_id: str) -> int:
    async with session_scope() as session:
        count = await session.execute(
            text("SELECT COUNT(*) FROM job_attempts WHERE job_id = :id"), {"id": job_id}
        )
        return int(count.scalar_one())


async def test_starts_and_successes_arriving_together_share_one_transaction(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_ids = await submit(client, auth, 20)
    decisions = await start_all(job_ids)
    assert all(isinstance(d, service.Started) for d in decisions), decisions
    done = await asyncio.gather(*(group_commit.complete_attempt(d.key, None) for d in decisions))
    assert done == [True] * 20
    stats = group_commit.group_stats()
    # The first caller flushes alone at once; the other 19 arrive while it runs and share the next flush.
    assert stats["starts"] == 20 and stats["start_flushes"] <= 2, stats
    assert stats["successes"] == 20 and stats["success_flushes"] <= 2, stats
    for job_id in job_ids:
        job = await get_job(client, auth, job_id)
        assert job["status"] == "done" and job["attempt"] == 1, job
        history = await get_attempts(client, auth, job_id)
        assert [a["outcome"] for a in history] == ["succeeded"] and history[0]["worker"] == WORKER


async def test_a_start_on_its_own_is_flushed_alone_without_waiting(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    for job_id in await submit(client, auth, 3):
        assert isinstance(await group_commit.start_attempt(job_id, WORKER), service.Started)
    stats = group_commit.group_stats()
    assert stats["start_flushes"] == stats["starts"] == 3, stats


async def test_starts_from_several_worker_names_share_one_transaction_each_with_its_own_worker(
    client: httpx.AsyncClient, auth: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    job_ids = await submit(client, auth, 6)
    workers = [f"host:{n % 2 + 1}" for n in range(len(job_ids))]
    with caplog.at_level(logging.WARNING, logger=group_commit.__name__):
        decisions = await asyncio.gather(
            *(
                group_commit.start_attempt(job_id, worker)
                for job_id, worker in zip(job_ids, workers, strict=True)
            )
        )
    assert all(isinstance(d, service.Started) for d in decisions), decisions
    assert "fell back" not in caplog.text
    async with session_scope() as session:
        rows = await session.execute(
            text("SELECT j.id, j.worker, a.worker FROM report_jobs j JOIN job_attempts a ON a.job_id = j.id")
        )
        held = {job_id: (job_worker, attempt_worker) for job_id, job_worker, attempt_worker in rows}
    assert held == {job_id: (worker, worker) for job_id, worker in zip(job_ids, workers, strict=True)}


async def test_a_start_that_loses_its_race_inside_a_shared_transaction_leaves_its_neighbours_started(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    """Another worker holds one job's row, starts it and commits while the batch waits for that row: the
    batch sees it running and answers Skip for it alone; the other nine commit in the same transaction."""
    job_ids = await submit(client, auth, 10)
    contested = job_ids[4]
    other = create_async_engine(get_settings().database_url.get_secret_value())
    try:
        async with other.connect() as conn:
            await conn.execute(
                text(
                    "UPDATE report_jobs SET status = 'running', attempt = attempt + 1, "
                    "attempts_total = attempts_total + 1, worker = 'other:2', started_at = NOW(6), "
                    "heartbeat_at = NOW(6) WHERE id = :id AND status = 'pending'"
                ),
                {"id": contested},
            )
            batch = asyncio.ensure_future(start_all(job_ids))
            await asyncio.sleep(0.5)  # the batch's locking read now waits on the contested row
            assert not batch.done()
            await conn.commit()
        decisions = await asyncio.wait_for(batch, 30)
    finally:
        await other.dispose()
    by_id = dict(zip(job_ids, decisions, strict=True))
    assert isinstance(by_id[contested], service.Skip), by_id[contested]
    assert "running" in by_id[contested].reason
    winners = [job_id for job_id in job_ids if job_id != contested]
    assert all(isinstance(by_id[job_id], service.Started) for job_id in winners), decisions
    assert group_commit.group_stats()["start_flushes"] <= 2
    for job_id in winners:
        job = await get_job(client, auth, job_id)
        assert job["status"] == "running" and job["attempt"] == 1, job
        assert await attempt_rows(job_id) == 1
    assert await attempt_rows(contested) == 0  # the other worker's start, not ours


async def test_a_success_whose_attempt_was_declared_lost_leaves_its_neighbours_done(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_ids = await submit(client, auth, 8)
    decisions = await start_all(job_ids)
    keys = [d.key for d in decisions]
    lost = keys[3]
    # The stuck scan declared this attempt lost (its worker looked dead): its late success must not land.
    failed = await service.fail_attempt(lost, AttemptOutcome.LOST, service.error_dict("LostWorker", "", True))
    assert failed.applied
    flushes_before = group_commit.group_stats()["success_flushes"]
    results = await asyncio.gather(*(group_commit.complete_attempt(key, None) for key in keys))
    assert results == [key is not lost for key in keys]
    assert group_commit.group_stats()["success_flushes"] - flushes_before <= 2
    for key in keys:
        job = await get_job(client, auth, key.job_id)
        assert job["status"] == ("retrying" if key is lost else "done"), job


async def test_the_same_job_twice_in_one_batch_starts_once_and_finishes_once(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    """Two deliveries of one job in one process (a fresh message beside an old one): one start, one Skip;
    two reports of its success in one batch: the batch falls back to one job at a time, one wins."""
    job_ids = await submit(client, auth, 4)
    decisions = await start_all([*job_ids, job_ids[0]])
    assert sum(isinstance(d, service.Started) for d in decisions) == 4
    assert isinstance(decisions[-1], service.Skip)
    keys = [d.key for d in decisions[:4]]
    results = await asyncio.gather(*(group_commit.complete_attempt(key, None) for key in [*keys, keys[0]]))
    assert sorted(results) == [False, True, True, True, True]
    assert await attempt_rows(job_ids[0]) == 1
    assert (await get_job(client, auth, job_ids[0]))["status"] == "done"


async def test_group_commit_max_jobs_1_flushes_every_job_alone(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(WORKER_GROUP_COMMIT_MAX_JOBS=1)
    decisions = await start_all(await submit(client, auth, 5))
    assert all(isinstance(d, service.Started) for d in decisions)
    assert group_commit.group_stats()["start_flushes"] == 5


async def test_attempts_started_in_one_batch_are_listed_in_submission_order(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    """Deliveries reach the batch in any order (each first waits for its own Redis round trip); the batch's
    attempts share one `started_at`, so their rows go in job-id order: the oldest job is listed first."""
    job_ids = sorted(await submit(client, auth, 6))  # ULIDs: in submission order
    newest_first = list(reversed(job_ids))
    assert all(isinstance(d, service.Started) for d in await start_all(newest_first))
    assert group_commit.group_stats()["start_flushes"] == 1  # all six reach the batch before it flushes
    async with session_scope() as session:
        rows = await session.execute(text("SELECT job_id, started_at FROM job_attempts ORDER BY id"))
        listed = [(job_id, started_at) for job_id, started_at in rows]
    assert [job_id for job_id, _ in listed] == job_ids
    assert len({started_at for _, started_at in listed}) == 1
