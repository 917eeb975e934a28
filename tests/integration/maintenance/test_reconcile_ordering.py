"""Reconciliation and ordering keys: a job its recorded predecessor still holds back gets no message (its
predecessor's end wakes it), and one whose predecessor ended is queued again even if that wake was lost.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from app.maintenance import service as maintenance
from tests.utils.dead_letters import letters, resolve
from tests.utils.jobs import get_job, submit
from tests.utils.lanes import in_a_lane
from tests.utils.workers import drain


async def ticks(count: int = 2) -> None:
    await asyncio.sleep(maintenance.grace_s())
    for _ in range(count):
        await maintenance.run_tick(use_lease=False)


async def behind_a_dead_job(
    client: httpx.AsyncClient, auth: dict[str, str], key: str, followers: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    job = {"ordering_key": key}
    dead = await submit(client, auth, "demo.flaky", job=job, fail_times=1, permanent=True)
    waiting = [await submit(client, auth, "demo.csv", job=job, rows=1) for _ in range(followers)]
    await drain()
    assert (await get_job(client, auth, dead["id"]))["status"] == "dead"
    return dead, waiting


async def test_a_backlog_behind_a_dead_job_gets_no_messages_after_a_flush(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    """Queued, each would be claimed (taking a slot of its tenant's and type's caps), refused and dropped,
    pass after pass: the 10-minute soak's tenant whose runnable jobs starved behind its own keyed backlog."""
    dead, waiting = await behind_a_dead_job(client, auth, "acct-r1", 4)
    free = await submit(client, auth, "demo.sleep", seconds=30)
    env.redis.flushall()
    await ticks()
    ids = [job["id"] for job in waiting]
    assert await in_a_lane(ids) == set()
    assert await in_a_lane([free["id"]]) == {free["id"]}
    chain = [(await get_job(client, auth, job_id))["blocked_by"] for job_id in ids]
    assert chain == [dead["id"], *ids[:-1]], "each waits on its nearest predecessor"


async def test_a_job_whose_predecessor_was_resolved_is_queued_again_when_the_wake_was_lost(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    _dead, waiting = await behind_a_dead_job(client, auth, "acct-r2", 2)
    (letter,) = [item for item in await letters(client, auth) if item["job_id"] == _dead["id"]]
    assert (await resolve(client, auth, letter["id"], "sent by hand")).status_code == 200
    env.redis.flushall()  # the wake the resolve sent goes with it
    await ticks()
    assert await in_a_lane([waiting[0]["id"]]) == {waiting[0]["id"]}
    assert await in_a_lane([waiting[1]["id"]]) == set(), "the second still waits on the first"
    await drain()
    for job in waiting:
        assert (await get_job(client, auth, job["id"]))["status"] == "done"
