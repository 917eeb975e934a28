"""The slot check after start (app.fairshare.service.hold_slot, lua/hold.lua): the attempts a worker starts
together are checked in one round trip, each answered as a call of its own would have been.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from app.attempts import service
from app.dispatch import capacity
from app.dispatch.lanes import attempt_code
from app.fairshare import service as fairshare
from tests.utils.jobs import submit_id
from tests.utils.lanes import claim_at, now_ms

LEASE_MS = 60_000


async def started(job_id: str) -> service.Started:
    decision = await service.start_attempt(job_id, "w1")
    assert isinstance(decision, service.Started), decision
    return decision


async def check(start: service.Started, arq_id: str) -> str:
    key = start.key
    return await fairshare.hold_slot(start.job, arq_id, "w1", LEASE_MS, attempt_code(key.replay, key.attempt))


async def test_attempts_started_together_check_their_slots_in_one_round_trip(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    ids = [await submit_id(client, auth, "demo.sleep", seconds=1) for _ in range(5)]
    await fairshare.rebuild_dispatch()
    assert sorted(await claim_at(now_ms(), 10, "w1")) == sorted(f"{job_id}:0" for job_id in ids)
    starts = [await started(job_id) for job_id in ids]
    flushes = fairshare._holds().flushes

    answers = await asyncio.gather(*(check(start, f"{start.job.id}:0") for start in starts))

    assert answers == ["ok"] * 5
    assert fairshare._holds().flushes == flushes + 1


async def test_a_batch_of_slot_checks_fills_a_cap_in_order_and_no_further(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    """Under a cap of 2, C runs (its slot rebuilt from MySQL after a flush); A and B started holding no slot
    (a flush took their claims): their checks, in one batch, give the free slot to A and hand B back
    ('over'), as two calls in that order would."""
    await env.set(REPORT_TYPE_MAX_CONCURRENCY=json.dumps({"demo.sleep": 2}))
    a, b, c = [await submit_id(client, auth, "demo.sleep", seconds=1) for _ in range(3)]
    await started(c)
    env.redis.flushall()
    assert await fairshare.rebuild_dispatch()
    first, second = await started(a), await started(b)

    answers = await asyncio.gather(check(first, f"{a}:0"), check(second, f"{b}:0"))

    assert answers == ["ok", "over"]


async def test_a_slot_check_whose_caller_was_cancelled_before_it_was_sent_is_never_applied(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's first round trip fails (Redis away) and it waits to try again; meanwhile the worker
    stops and cancels the delivery (its attempt is handed back). The retry must not hold a slot for it."""
    a = await submit_id(client, auth, "demo.sleep", seconds=1)
    env.redis.flushall()
    assert await fairshare.rebuild_dispatch()
    start = await started(a)
    real, failed = capacity.hold_slots, asyncio.Event()

    async def away_once(holds: Any) -> Any:
        if not failed.is_set():
            failed.set()
            raise ConnectionError("Redis away")
        return await real(holds)

    monkeypatch.setattr(capacity, "hold_slots", away_once)
    checking = asyncio.create_task(check(start, f"{a}:0"))
    await failed.wait()
    checking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await checking
    await asyncio.sleep(0.5)  # past the batch's retry

    assert a not in await capacity.slots_held()
