"""Hostile review of the dispatch rewrite (issue 26): caps under a Redis flush and under a worker declared
lost that is still alive. Every test drives the real scripts and services by hand, one party at a time.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from app.attempts import service
from app.attempts.runner import SlotCheck, run_job
from app.core import redis_pool
from app.core.config import get_settings
from app.core.states import AttemptKey, AttemptOutcome
from app.dispatch import capacity, claiming, lanes
from app.dispatch.lanes import Running, attempt_code
from app.fairshare import service as fairshare
from app.fairshare.repository import FairShareRepository
from app.maintenance import service as maintenance
from app.maintenance.reconcile import reconcile_jobs
from tests.utils.jobs import get_job, submit_id
from tests.utils.lanes import claim_at, in_a_lane, now_ms

CAP = json.dumps({"demo.sleep": 1})


async def zombie_finishes(arq_id: str, retry_in_ms: int | None = None, token: str = "w1") -> None:
    """What a worker's run_claimed does at the end of a delivery whose report ended (its outcome recorded or
    discarded as late): arq's finish of the message it was handed, through the worker's finish script; with
    `retry_in_ms`, arq's Retry instead (what run_report raises when recording met a database outage)."""
    done = claiming.Finish(arq_id, retry_in_ms is None, None, None, False, retry_in_ms, None)
    scripts = lanes.Scripts(await redis_pool.get_pool())
    await claiming.record_finishes(scripts, get_settings().queue_name, [done], token)


async def claim_one(token: str = claiming.DEFAULT_TOKEN) -> list[str]:
    """One claim by the worker whose delivery token is `token` (each worker process has its own)."""
    return await claim_at(now_ms(), 10, token)


def holding(arq_id: str, token: str) -> SlotCheck:
    """The slot check a worker whose delivery token is `token` makes once its delivery of `arq_id` started."""
    return lambda job, key: fairshare.hold_slot(
        job, arq_id, token, 60_000, attempt_code(key.replay, key.attempt)
    )


async def started(job_id: str, worker: str) -> AttemptKey:
    decision = await service.start_attempt(job_id, worker)
    assert isinstance(decision, service.Started), decision
    return decision.key


async def test_a_flush_between_a_claim_and_its_start_does_not_let_a_second_job_run_over_the_cap(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    """W1 claims A (the slot of cap 1) and is about to start it (claim.after_claim); Redis is flushed; the
    next claim anywhere rebuilds the dispatch state from MySQL, where A is still pending, so A holds no slot;
    W1 then starts A; reconciliation queues B; B is claimed and started beside A: two running under a cap of
    1.
    """
    await env.set(REPORT_TYPE_MAX_CONCURRENCY=CAP)
    a = await submit_id(client, auth, "demo.sleep", seconds=1)
    await fairshare.rebuild_dispatch()
    assert await claim_one() == [f"{a}:0"]  # W1 holds the one slot; its start is on the way
    b = await submit_id(client, auth, "demo.sleep", seconds=1)
    assert await claim_one() == []  # the cap holds while W1 holds the slot

    env.redis.flushall()  # Redis restarts empty (no persistence) or someone runs FLUSHALL
    # Another worker's poll answers 'rebuild' and rebuilds from MySQL (OrchestratorWorker.claim does this).
    assert await fairshare.rebuild_dispatch()
    # W1 resumes: its start commits, then (as every worker's delivery does) it makes sure A holds its slot.
    assert (await run_job(a, "w1", hold_slot=holding(f"{a}:0", "w1"))).detail == "done"
    await asyncio.sleep(maintenance.grace_s())
    await maintenance.run_tick(use_lease=False)  # B (pending) gets its message back

    claimed = await claim_one()
    assert claimed == [], f"{claimed} claimed while {a} runs under a cap of 1"
    assert (await get_job(client, auth, b))["status"] == "pending"


async def test_a_start_that_finds_its_slot_flushed_and_the_cap_taken_hands_its_attempt_back_unburnt(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    """As above, but after the rebuild B (more urgent) is claimed into the only slot before W1's start
    commits: W1's slot check finds no slot for A and the cap full, so A goes back to pending, attempt not
    counted, its message in its lane; B runs alone."""
    await env.set(REPORT_TYPE_MAX_CONCURRENCY=CAP)
    a = await submit_id(client, auth, "demo.sleep", seconds=0.2)
    await fairshare.rebuild_dispatch()
    assert await claim_one("w1") == [f"{a}:0"]
    b = await submit_id(client, auth, "demo.sleep", job={"priority": 9}, seconds=0.2)
    env.redis.flushall()
    assert await fairshare.rebuild_dispatch()
    await asyncio.sleep(maintenance.grace_s())
    await maintenance.run_tick(use_lease=False)  # both pending: both get their messages back
    assert await claim_one("w2") == [f"{b}:0"]  # the more urgent one takes the only slot
    await started(b, "w2")

    result = await run_job(a, "w1", hold_slot=holding(f"{a}:0", "w1"))
    assert "handed back" in result.detail
    job = await get_job(client, auth, a)
    assert (job["status"], job["attempt"]) == ("pending", 0), job
    assert await in_a_lane([a]) == {a}
    assert await capacity.running_counts() == ({"demo.sleep": 1}, {"acme": 1})


async def test_a_zombie_finishing_its_old_message_after_a_flush_does_not_free_the_slot_of_the_running_attempt(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    """Attempt 1 of A runs on W1 (message A:0) and is declared lost (W1 stalls, still alive); its rescue is
    A:0:lost1. Redis is flushed: the rescue is gone, and reconciliation queues A again under arq id A:0, the
    very id W1 still runs. W2 claims the new A:0 and runs attempt 2 (holding the slot as A:0). W1 wakes,
    its late success is discarded, and it finishes its delivery of A:0: the finish script takes the new
    message's slot for its own and frees it. B then starts beside A's attempt 2 under a cap of 1."""
    await env.set(REPORT_TYPE_MAX_CONCURRENCY=CAP, STUCK_AFTER_S="0.5", RETRY_DELAYS_S="[0.05, 0.05, 0.05]")
    a = await submit_id(client, auth, "demo.sleep", seconds=1)
    await fairshare.rebuild_dispatch()
    assert await claim_one("w1") == [f"{a}:0"]
    first = await started(a, "w1")  # W1 runs attempt 1 ... and stops heartbeating
    await asyncio.sleep(0.6)
    assert (await maintenance.run_tick(use_lease=False))["lost"] == 1  # rescue A:0:lost1 queued

    env.redis.flushall()
    await asyncio.sleep(maintenance.grace_s())  # A's retry, declared by the last tick, is past the grace
    await maintenance.run_tick(use_lease=False)  # full walk: rebuild, A (retrying) queued again as A:0
    b = await submit_id(client, auth, "demo.sleep", seconds=1)
    await asyncio.sleep(0.1)  # A's backoff is over
    assert await claim_one("w2") == [f"{a}:0"]  # W2: the reconciled message, same arq id as W1's
    await started(a, "w2")  # attempt 2 runs, holding the slot
    assert await claim_one() == []  # the cap holds while attempt 2 runs

    # W1 wakes up: its success is late (discarded), then arq's finish of the message it was handed.
    assert not await service.complete_attempt(first, None)
    await zombie_finishes(f"{a}:0")

    claimed = await claim_one()
    assert claimed == [], f"{claimed} claimed while attempt 2 of {a} runs under a cap of 1"
    assert (await get_job(client, auth, b))["status"] == "pending"


async def test_a_zombie_retrying_its_old_message_after_a_flush_does_not_requeue_a_running_job(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    """As above, but W1's late delivery ends with arq's Retry (its outcome could not be recorded: a database
    outage past RECORD_OUTCOME_FOR_S). The finish script finds a message named A:0 (the reconciled one, which
    W2 is running), deletes its in-progress key and puts it back in its lane: another worker claims the
    running job's message a second time, holding W2's slot as its own."""
    await env.set(REPORT_TYPE_MAX_CONCURRENCY=CAP, STUCK_AFTER_S="0.5", RETRY_DELAYS_S="[0.05, 0.05, 0.05]")
    a = await submit_id(client, auth, "demo.sleep", seconds=1)
    await fairshare.rebuild_dispatch()
    assert await claim_one("w1") == [f"{a}:0"]
    await started(a, "w1")
    await asyncio.sleep(0.6)
    assert (await maintenance.run_tick(use_lease=False))["lost"] == 1
    env.redis.flushall()
    await asyncio.sleep(maintenance.grace_s())
    await maintenance.run_tick(use_lease=False)
    await asyncio.sleep(0.1)
    assert await claim_one("w2") == [f"{a}:0"]  # W2
    await started(a, "w2")  # attempt 2 runs

    await zombie_finishes(f"{a}:0", retry_in_ms=100)  # W1's arq Retry of the message it was handed
    await asyncio.sleep(0.2)
    claimed = await claim_one()
    assert claimed == [], f"{claimed} handed out again while W2 runs attempt 2 of {a} from it"


async def test_a_zombie_finishing_its_dropped_message_after_a_rebuild_does_not_free_the_rebuilt_slot(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    """Attempt 1 of A (W1, message A:0) is declared lost; the rescue A:0:lost1 runs attempt 2 on W2. Redis
    is flushed and rebuilt: A is running, so its slot is rebuilt as '*' (any message of A may take it over
    or free it). W1, still alive, finishes its old delivery of A:0: release() accepts '*' from any message
    and frees the slot that attempt 2 runs under. B starts beside it under a cap of 1."""
    await env.set(REPORT_TYPE_MAX_CONCURRENCY=CAP, STUCK_AFTER_S="0.5", RETRY_DELAYS_S="[0.05, 0.05, 0.05]")
    a = await submit_id(client, auth, "demo.sleep", seconds=1)
    await fairshare.rebuild_dispatch()
    assert await claim_one("w1") == [f"{a}:0"]
    first = await started(a, "w1")
    await asyncio.sleep(0.6)
    assert (await maintenance.run_tick(use_lease=False))["lost"] == 1
    await asyncio.sleep(0.1)
    assert await claim_one("w2") == [f"{a}:0:lost1"]  # W2
    await started(a, "w2")  # attempt 2

    env.redis.flushall()
    assert await fairshare.rebuild_dispatch()  # A running: its slot is rebuilt as '*'
    b = await submit_id(client, auth, "demo.sleep", seconds=1)
    assert await claim_one() == []  # the rebuilt slot holds the cap

    assert not await service.complete_attempt(first, None)  # W1's late success, discarded
    await zombie_finishes(f"{a}:0")  # ... and the end of its delivery

    claimed = await claim_one()
    assert claimed == [], f"{claimed} claimed while attempt 2 of {a} runs under a cap of 1"
    assert (await get_job(client, auth, b))["status"] == "pending"


async def test_the_slot_sweep_never_frees_a_slot_claimed_after_it_looked(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any, monkeypatch: Any
) -> None:
    """The sweep reads the slots (a rebuilt '*' slot counts as old), asks MySQL which of their jobs run, and
    then frees the rest unconditionally (RELEASE_LUA with no holder). A claim that takes the '*' slot over in
    between (the job's next message) loses it to the sweep, its message is dropped, and its start goes on:
    the job runs holding no slot, and two more start beside it under a cap of 2.

    How a '*' slot outlives its job: A runs when the rebuild reads MySQL; its attempt fails (retryable) and
    its worker's finish runs before the rebuild's script, so the rebuild counts A as running after all."""

    cap = json.dumps({"demo.sleep": 2})
    await env.set(REPORT_TYPE_MAX_CONCURRENCY=cap, RETRY_DELAYS_S="[0.05, 0.05, 0.05]")
    a = await submit_id(client, auth, "demo.sleep", seconds=1)
    await fairshare.rebuild_dispatch()
    assert await claim_one() == [f"{a}:0"]
    first = await started(a, "w1")
    env.redis.flushall()
    # The rebuild read MySQL (A running) ... W1's attempt fails and its finish finds nothing to release ...
    await service.fail_attempt(first, AttemptOutcome.FAILED, service.error_dict("X", "retry me", True))
    await zombie_finishes(f"{a}:0")
    # ... then the rebuild's script runs with what it read.
    policy = await fairshare.current_policy()
    assert await capacity.rebuild_dispatch([Running(a, "acme", "demo.sleep")], policy)
    await asyncio.sleep(0.1)
    await reconcile_jobs([a])  # A (retrying, due) gets its message back

    real_running_among = FairShareRepository.running_among
    claimed_meanwhile: list[str] = []

    async def running_among(self: Any, job_ids: Any) -> set[str]:
        answer = await real_running_among(self, job_ids)
        claimed_meanwhile.extend(await claim_one())  # W2 takes A's message (and the '*' slot) over
        return answer

    monkeypatch.setattr(FairShareRepository, "running_among", running_among)
    freed = await fairshare.sweep_slots(older_than_s=1)
    monkeypatch.setattr(FairShareRepository, "running_among", real_running_among)
    assert claimed_meanwhile == [f"{a}:0"] and freed == [a], (claimed_meanwhile, freed)
    await started(a, "w2")  # W2's start goes on: attempt 2 runs

    for _ in range(2):
        await submit_id(client, auth, "demo.sleep", seconds=1)
    claimed = await claim_one()
    assert len(claimed) <= 1, f"{claimed} claimed while attempt 2 of {a} runs under a cap of 2"
