"""The group commit's two ways to the database: on MariaDB plain jobs run on the driver's connection while a
job with an ordering key or a callback is decided in a session transaction beside them; on SQLite (`make
run`) every batch runs in the session. Either way each job is decided alone and the results are the same."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from app.attempts import group_commit, service
from app.core.driver import driver_path_enabled
from app.core.states import JobStatus
from app.core.tenancy import EVERY_TENANT
from app.jobs import service as jobs
from tests.utils.database import alembic
from tests.utils.jobs import get_attempts, get_job, submit

WORKER = "host:1"


async def start_all(job_ids: list[str]) -> list[Any]:
    return list(await asyncio.gather(*(group_commit.start_attempt(job_id, WORKER) for job_id in job_ids)))


async def test_ordered_plain_and_callback_jobs_in_one_batch_are_each_decided_as_alone(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any
) -> None:
    assert driver_path_enabled()
    first = (await submit(client, auth, "demo.csv", job={"ordering_key": "k"}, rows=1))["id"]
    second = (await submit(client, auth, "demo.csv", job={"ordering_key": "k"}, rows=1))["id"]
    called = (await submit(client, auth, "demo.csv", job={"callback_url": receiver.url}, rows=1))["id"]
    plain = [(await submit(client, auth, "demo.csv", rows=1))["id"] for _ in range(3)]
    order = [plain[0], second, first, called, plain[1], plain[2]]
    decisions = dict(zip(order, await start_all(order), strict=True))
    assert isinstance(decisions[second], service.Blocked) and decisions[second].blocker_id == first
    started = [job_id for job_id in order if job_id != second]
    assert all(isinstance(decisions[job_id], service.Started) for job_id in started), decisions
    done = await asyncio.gather(*(group_commit.complete_attempt(decisions[j].key, None) for j in started))
    assert done == [True] * len(started)
    for job_id in started:
        job = await get_job(client, auth, job_id)
        assert (job["status"], job["attempt"]) == ("done", 1), job
        assert [a["outcome"] for a in await get_attempts(client, auth, job_id)] == ["succeeded"]
    assert (await get_job(client, auth, second))["blocked_by"] == first
    assert (await get_job(client, auth, called))["callback"]["status"] in {"pending", "delivered"}


async def test_on_sqlite_starts_and_successes_still_share_one_transaction(env: Any, tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'reports.db'}"
    assert alembic(url, "upgrade", "head").returncode == 0
    await env.set(DATABASE_URL=url)
    assert not driver_path_enabled()
    request = jobs.SubmitRequest(report_type="demo.csv", params={"rows": 1})
    job_ids = [(await jobs.submit("acme", request)).job.id for _ in range(8)]
    decisions = await start_all(job_ids)
    assert all(isinstance(d, service.Started) for d in decisions), decisions
    assert await start_all(job_ids[:2]) == [service.Skip("job is running")] * 2
    done = await asyncio.gather(*(group_commit.complete_attempt(d.key, None) for d in decisions))
    assert done == [True] * 8
    stats = group_commit.group_stats()
    assert stats["start_flushes"] <= 4 and stats["success_flushes"] <= 2, stats
    for job_id in job_ids:
        job = await jobs.get_job(job_id, EVERY_TENANT)
        assert (job.status, job.attempt) == (JobStatus.DONE, 1), job
