"""Group commit of single submits against real MariaDB and Redis: concurrent `POST /v1/jobs` requests share
one transaction and one enqueue, and each is still answered alone — an Idempotency-Key taken inside the
batch answers the job that holds it, its neighbours are created and queued."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
import redis

from app.core.config import get_settings
from app.core.db import session_scope
from app.core.tenancy import EVERY_TENANT
from app.jobs import group_submit
from app.jobs import service as jobs
from app.jobs.list_repository import JobFilter, JobListRepository
from tests.utils.jobs import get_job
from tests.utils.polling import eventually

BODY = {"report_type": "demo.csv", "params": {"rows": 1}}


async def queued(env: Any) -> set[str]:
    """The job ids in arq's queue (message ids are `<job id>:<replay>`)."""
    client = redis.Redis.from_url(env.redis.url)
    try:
        members = client.zrange(get_settings().queue_name, 0, -1)
    finally:
        client.close()
    return {member.decode().split(":")[0] for member in members}


async def test_concurrent_submits_share_one_transaction_and_every_job_is_queued(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    responses = await asyncio.gather(*(client.post("/v1/jobs", json=BODY, headers=auth) for _ in range(20)))
    assert [r.status_code for r in responses] == [202] * 20
    job_ids = {r.json()["id"] for r in responses}
    assert len(job_ids) == 20
    stats = group_submit.group_stats()
    # The first request is written alone at once; the others arrive while it commits and share the next.
    assert stats["jobs"] == 20 and stats["flushes"] <= 3, stats
    assert await queued(env) == job_ids
    for job_id in job_ids:
        assert (await get_job(client, auth, job_id))["status"] == "pending"


async def test_a_key_taken_inside_a_shared_batch_answers_its_job_and_the_neighbours_are_created(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    keyed = {**auth, "Idempotency-Key": "dup"}
    requests = [client.post("/v1/jobs", json=BODY, headers=keyed if i % 2 else auth) for i in range(12)]
    responses = await asyncio.gather(*requests)
    keyed_answers = [r for i, r in enumerate(responses) if i % 2]
    plain_answers = [r for i, r in enumerate(responses) if not i % 2]
    assert sorted(r.status_code for r in keyed_answers) == [200] * 5 + [202]
    assert len({r.json()["id"] for r in keyed_answers}) == 1
    assert [r.status_code for r in plain_answers] == [202] * 6
    created = {r.json()["id"] for r in responses}
    assert len(created) == 7
    assert await queued(env) == created


async def test_a_request_cancelled_while_its_batch_commits_leaves_its_job_committed_and_queued(
    env: Any,
) -> None:
    """The client hangs up (the request task is cancelled) once its job is in a flush: the flush still
    commits the row and enqueues it, so nothing committed is left for reconciliation to find."""
    request = jobs.SubmitRequest(report_type="demo.csv", params={"rows": 1})
    task = asyncio.ensure_future(jobs.submit("acme", request))
    # One loop step at a time, so the request is cancelled while its flush is still writing.
    while group_submit.group_stats()["jobs"] == 0:  # noqa: ASYNC110
        await asyncio.sleep(0)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    async def committed_and_queued() -> bool:
        async with session_scope() as session:
            page = await JobListRepository(session).page(JobFilter(EVERY_TENANT), None, 10)
            ids = [row.id for row in page.rows]
        return len(ids) == 1 and await queued(env) == set(ids)

    await eventually(committed_and_queued, 10, "the cancelled request's job committed and queued")
