"""Hostile review of the slot check after start (lua/hold.lua), the release that compares what its caller saw
(lua/release.lua) and the claim time set on every claim: interleavings in which a running attempt ends up
holding no slot (a cap is exceeded), a job waits with no message, or a started attempt is stranded. Every
test drives the real scripts and services by hand, one party at a time, with delivery tokens "w1"/"w2".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx
import pytest
from redis.exceptions import ReadOnlyError

from app.attempts import service
from app.attempts.runner import run_job
from app.core import redis_pool
from app.core.config import get_settings
from app.core.states import AttemptKey
from app.dispatch import capacity, claiming, lanes
from app.dispatch.lanes import attempt_code
from app.fairshare import service as fairshare
from app.fairshare.repository import FairShareRepository
from app.maintenance import service as maintenance
from app.models import ReportJob
from tests.utils.jobs import get_job, submit_id
from tests.utils.lanes import claim_at, messages_of, now_ms

CAP = json.dumps({"demo.sleep": 1})
LEASE_MS = 60_000


async def claim_one(token: str) -> list[str]:
    """One claim by the worker whose delivery token is `token`."""
    return await claim_at(now_ms(), 10, token)


async def arq_finish(arq_id: str, token: str, finish: bool = True) -> None:
    """What run_claimed does once a delivery ends: arq's finish of the message (for good, or with `finish`
    False back to its lane: a delivery cancelled by the worker's shutdown), through the finish script."""
    done = claiming.Finish(arq_id, finish, None, None, False, None, None)
    scripts = lanes.Scripts(await redis_pool.get_pool())
    await claiming.record_finishes(scripts, get_settings().queue_name, [done], token)


async def start(job_id: str, worker: str) -> service.Started:
    decision = await service.start_attempt(job_id, worker)
    assert isinstance(decision, service.Started), decision
    return decision


async def hold(started: service.Started, arq_id: str, token: str) -> bool:
    """The worker's slot check right after its start (workers/report_worker.slot_check): True to run."""
    return await check(started.job, started.key, arq_id, token) == "ok"


async def check(job: ReportJob, key: AttemptKey, arq_id: str, token: str) -> str:
    return await fairshare.hold_slot(job, arq_id, token, LEASE_MS, attempt_code(key.replay, key.attempt))


async def test_a_slot_held_by_a_start_after_the_sweep_looked_is_not_freed_by_that_sweep(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1. W1 claims A (A:0, the only slot of cap 1); its start is slow (a frozen process, a lock wait), so
       the claim grows older than STUCK_AFTER_S.
    2. The scheduler's sweep reads the slots (A:0, claimed at t0) and asks MySQL: A is not running.
    3. W1's start commits; its slot check (hold.lua) finds A:0 held by itself with its own delivery token and
       answers 'ok' at once, leaving claimed_at at t0.
    4. The sweep's release compares (A:0, t0) with what Redis holds: unchanged, so it frees the slot and drops
       A:0 (the in-progress key of W1's running delivery with it).
    5. A runs holding no slot; B is claimed and runs beside it under a cap of 1.
    """
    await env.set(REPORT_TYPE_MAX_CONCURRENCY=CAP)
    a = await submit_id(client, auth, "demo.sleep", seconds=1)
    await fairshare.rebuild_dispatch()
    assert await claim_one("w1") == [f"{a}:0"]
    await asyncio.sleep(0.2)  # W1's start is late: the claim is older than the sweep's age

    real_running_among = FairShareRepository.running_among
    held_meanwhile: list[bool] = []

    async def running_among(self: Any, job_ids: Any) -> set[str]:
        answer = await real_running_among(self, job_ids)
        started = await start(a, "w1")  # W1's start commits right after the sweep's read ...
        held_meanwhile.append(await hold(started, f"{a}:0", "w1"))  # ... and its slot check says 'ok'
        return answer

    monkeypatch.setattr(FairShareRepository, "running_among", running_among)
    await fairshare.sweep_slots(older_than_s=0.1)
    monkeypatch.setattr(FairShareRepository, "running_among", real_running_among)
    assert held_meanwhile == [True]
    assert (await get_job(client, auth, a))["status"] == "running"

    b = await submit_id(client, auth, "demo.sleep", seconds=1)
    claimed = await claim_one("w2")
    assert claimed == [], f"{claimed} claimed while {a} runs under a cap of 1"
    assert (await get_job(client, auth, b))["status"] == "pending"


async def test_a_late_hold_of_a_superseded_attempt_does_not_take_the_slot_of_the_running_attempt(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    """1. W1 claims A:0 and starts attempt 1; W1 freezes right after the start, before its slot check.
    2. No heartbeat: the scheduler declares attempt 1 lost, frees A's slot (as seen) and queues the rescue
       A:0:lost1. W2 claims it, starts attempt 2 and holds the slot (holder A:0:lost1, token w2).
    3. W1 thaws and makes its slot check for A:0: hold.lua finds the job's slot held by another message and
       takes it over ("MySQL says this attempt runs") -- holder A:0, in-progress A:0 = w1 -- and answers 'ok',
       so W1 runs the superseded attempt's report beside attempt 2.
    4. W1's report ends before its first heartbeat; its success is late (discarded) and its delivery's finish
       (token w1 now matches the in-progress key hold wrote) frees the slot it took over.
    5. Attempt 2 runs on W2 holding no slot: B is claimed beside it under a cap of 1.
    """
    await env.set(REPORT_TYPE_MAX_CONCURRENCY=CAP, STUCK_AFTER_S="0.5", RETRY_DELAYS_S="[0.05, 0.05, 0.05]")
    a = await submit_id(client, auth, "demo.sleep", seconds=1)
    await fairshare.rebuild_dispatch()
    assert await claim_one("w1") == [f"{a}:0"]
    first = await start(a, "w1")  # ... and W1 freezes before its slot check
    await asyncio.sleep(0.6)
    assert (await maintenance.run_tick(use_lease=False))["lost"] == 1
    await asyncio.sleep(0.1)
    assert await claim_one("w2") == [f"{a}:0:lost1"]
    second = await start(a, "w2")
    assert await hold(second, f"{a}:0:lost1", "w2")  # attempt 2 runs holding the one slot
    b = await submit_id(client, auth, "demo.sleep", seconds=1)
    assert await claim_one("w1") == []  # the cap holds while attempt 2 runs

    await hold(first, f"{a}:0", "w1")  # W1 thaws: the slot check of its superseded attempt
    assert not await service.complete_attempt(first.key, None)  # its report ended; the success is late
    await arq_finish(f"{a}:0", "w1")  # ... and its delivery ends

    claimed = await claim_one("w1")
    assert claimed == [], f"{claimed} claimed while attempt 2 of {a} runs under a cap of 1"
    assert (await get_job(client, auth, b))["status"] == "pending"


async def test_a_late_hold_of_a_superseded_attempt_does_not_make_the_claim_drop_the_rescue(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    """1. W1 claims A:0, starts attempt 1 and freezes before its slot check.
    2. Attempt 1 is declared lost: A's slot is freed, A:0 dropped, A is retrying with its rescue A:0:lost1
       queued for after the backoff.
    3. W1 thaws before the rescue is claimed: hold.lua finds no slot for A and counts one for A:0 (a message
       that no longer exists), writing an in-progress key for it.
    4. The rescue falls due and is claimed: A's slot is held by another message (A:0), so the claim drops the
       rescue as a second message of the job -- and A:0 has no message to carry the job either.
    5. A is retrying with no message at all: it waits for the reconciliation to come round, and the message
       that brings back (A:0 again) meets W1's in-progress key (not claimable) until W1's finish deletes it.
    """
    await env.set(STUCK_AFTER_S="0.5", RETRY_DELAYS_S="[0.1, 0.1, 0.1]")
    a = await submit_id(client, auth, "demo.sleep", seconds=1)
    await fairshare.rebuild_dispatch()
    assert await claim_one("w1") == [f"{a}:0"]
    first = await start(a, "w1")  # ... and W1 freezes before its slot check
    await asyncio.sleep(0.6)
    assert (await maintenance.run_tick(use_lease=False))["lost"] == 1
    assert await messages_of(a) == [f"{a}:0:lost1"]

    await hold(first, f"{a}:0", "w1")  # W1 thaws: the slot check of its superseded attempt
    await asyncio.sleep(0.15)  # the rescue's backoff is over

    claimed = await claim_one("w2")
    assert (await get_job(client, auth, a))["status"] == "retrying"
    assert claimed == [f"{a}:0:lost1"], f"the rescue of {a} was dropped ({claimed}); {await messages_of(a)}"


async def test_a_slot_check_that_meets_a_redis_error_does_not_run_the_job_over_the_cap(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1. W1 claims A (the only slot of cap 1); Redis loses the claim (a flush or restart without
       persistence; or a failover whose replica never got the claim's write) and the state is rebuilt from
       MySQL, where A is still pending: A holds no slot.
    2. W1's start commits; its slot check meets an error -- e.g. READONLY from the old master it is still
       connected to after the failover (a ResponseError: the pool's retries do not cover it), or a
       connection error past the pool's ~20 s of retries while Redis is up for every other process.
    3. hold_slot answers True on any error ("no claim can happen meanwhile"): but the other workers do claim,
       against the rebuilt state. B is claimed and runs beside A under a cap of 1.
    """
    await env.set(REPORT_TYPE_MAX_CONCURRENCY=CAP)
    a = await submit_id(client, auth, "demo.sleep", seconds=1)
    await fairshare.rebuild_dispatch()
    assert await claim_one("w1") == [f"{a}:0"]
    env.redis.flushall()
    assert await fairshare.rebuild_dispatch()  # another worker's poll: A pending, no slot for it

    started = await start(a, "w1")

    async def unreachable(*_args: Any) -> str:
        raise ReadOnlyError("You can't write against a read only replica.")

    monkeypatch.setattr(capacity, "hold_slots", unreachable)
    monkeypatch.setattr(fairshare, "HOLD_FOR_S", 0.3)  # it keeps asking for a while, then hands A back
    runs = await hold(started, f"{a}:0", "w1")  # True: A runs
    monkeypatch.undo()

    b = await submit_id(client, auth, "demo.sleep", seconds=1)
    claimed = await claim_one("w2")
    assert not runs or claimed == [], f"{claimed} claimed while {a} runs under a cap of 1"
    assert (await get_job(client, auth, b))["status"] == "pending"


async def test_a_delivery_cancelled_during_its_slot_check_hands_its_started_attempt_back(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    """1. W1 claims A:0 and starts attempt 1; its slot check is in flight (a Redis round trip, or the pool's
       ~20 s of retries while Redis restarts).
    2. W1 is told to stop (SIGTERM) and its grace runs out: arq cancels the delivery. The CancelledError
       comes out of the hold's await in run_job, outside `_run_report`'s handler, so release_attempt is
       never called: attempt 1 stays running in MySQL. run_claimed treats the cancel as "will be run again":
       A:0 goes back to its lane and its slot is freed.
    3. W2 claims A:0; its start finds A running and Skips; its finish drops A:0.
    4. A is left running with no worker, no message and no slot until the stuck scan declares it lost after
       STUCK_AFTER_S, burning an attempt (dead-lettering the job if it was its last) -- where a shutdown
       hands an unfinished attempt back unburnt, and W2 would have run it to done.
    """
    a = await submit_id(client, auth, "demo.sleep", seconds=0.2)
    await fairshare.rebuild_dispatch()
    assert await claim_one("w1") == [f"{a}:0"]
    checking = asyncio.Event()

    async def slot_check_in_flight(_job: ReportJob, _key: AttemptKey) -> str:
        checking.set()
        await asyncio.Event().wait()  # Redis answers too late
        return "ok"

    delivery = asyncio.create_task(run_job(a, "w1", hold_slot=slot_check_in_flight))
    await checking.wait()
    delivery.cancel()  # the worker's shutdown cancels its deliveries once the grace is over
    with contextlib.suppress(asyncio.CancelledError):
        await delivery
    await arq_finish(f"{a}:0", "w1", finish=False)  # run_claimed: "cancelled, will be run again"

    assert await claim_one("w2") == [f"{a}:0"]
    result = await run_job(
        a, "w2", hold_slot=lambda job, key: check(job, key, f"{a}:0", "w2")
    )  # "job is running"
    await arq_finish(f"{a}:0", "w2")

    job = await get_job(client, auth, a)
    left = (job["status"], job["attempt"], await messages_of(a))
    assert left == ("done", 1, []), f"{a} left {left} after a shutdown; W2's delivery: {result.detail}"
