"""Hostile review of take_places: concurrent first inserts of a new ordering key."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from sqlalchemy import text

from app.core.db import session_scope
from app.core.times import utcnow
from app.jobs.building import JobSpec, build_job
from app.jobs.repository import JobRepository


async def test_concurrent_first_submits_of_a_new_ordering_key_all_get_202_and_distinct_places(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    body = {"report_type": "demo.csv", "params": {"rows": 1}, "ordering_key": "brand-new"}

    async def one(i: int) -> httpx.Response:
        return await client.post("/v1/jobs", json={**body, "params": {"rows": i + 1}}, headers=auth)

    answers = await asyncio.gather(*(one(i) for i in range(40)))
    assert [a.status_code for a in answers] == [202] * 40, [a.text for a in answers if a.status_code != 202]
    async with session_scope() as session:
        seqs = (await session.execute(text("SELECT ordering_seq FROM report_jobs"))).scalars().all()
    assert sorted(seqs) == list(range(1, 41))


async def test_submits_queued_behind_a_first_insert_of_a_key_that_rolls_back_all_get_202(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    """T1 is the first submit of a new key: it INSERTs the key's sequence row (ON DUPLICATE KEY UPDATE),
    then its job INSERT waits on another request's uncommitted row holding the same Idempotency-Key, and
    rolls back with a duplicate. Other submits of that key queued on the sequence row meanwhile. When T1's
    insert of the row rolls back, InnoDB turns their waits into gap locks and each one's insert intention
    waits for the other's: a deadlock, answered 503 to submits that did nothing wrong (MySQL is up)."""
    holding, release = asyncio.Event(), asyncio.Event()

    async def other_request_with_the_same_idempotency_key() -> None:
        async with session_scope() as session:
            spec = JobSpec("acme", "demo.csv", {"rows": 99}, idempotency_key="X")
            await JobRepository(session).add_job(build_job(spec, utcnow()))
            holding.set()
            await release.wait()

    r0 = asyncio.create_task(other_request_with_the_same_idempotency_key())
    await holding.wait()
    body = {"report_type": "demo.csv", "params": {"rows": 1}, "ordering_key": "fresh-key"}
    t1 = asyncio.create_task(client.post("/v1/jobs", json=body, headers={**auth, "Idempotency-Key": "X"}))
    await asyncio.sleep(0.5)  # T1 holds the new sequence row and waits on R0's idempotency key
    others = [asyncio.create_task(client.post("/v1/jobs", json=body, headers=auth)) for _ in range(4)]
    await asyncio.sleep(0.5)  # they queue on the sequence row
    release.set()
    await r0
    first = await t1
    answers = [await task for task in others]
    assert first.status_code == 409, first.text  # same key, another body
    assert [a.status_code for a in answers] == [202] * 4, [a.text for a in answers]
