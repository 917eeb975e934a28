"""Fair share with real worker processes: a small tenant is not stuck behind a backlog, weights, priority,
caps across workers, pause and resume, and caps that survive a SIGKILLed worker and a Redis flush.

Every claim is checked from MySQL's attempt start and finish times, and no slot may be left held in Redis
once the jobs ended.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from tests.utils.batches import item, post_batch
from tests.utils.fair_share_runs import most_at_once, no_slot_held, slots_held, starts
from tests.utils.fairshare import admin_call, pause_type, resume_type
from tests.utils.jobs import get_job, submit_id
from tests.utils.polling import eventually
from tests.utils.stack import STUCK_AFTER_S, Stack

# How far apart two workers' starts of jobs claimed one after the other may land in MySQL (a loaded CI box):
# well under the flush test's 0.4 s jobs, so a job claimed a whole slot early still fails it.
CLAIM_TO_START = timedelta(milliseconds=150)

pytestmark = pytest.mark.timeout(180)


def bearer(stack: Stack, tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {stack.create_key(tenant)}"}


async def backlog(client: object, headers: dict[str, str] | None, count: int, **job: object) -> None:
    body = item("demo.sleep", seconds=0.1)
    body.update(job)
    for start in range(0, count, 1000):
        await post_batch(client, headers, [body] * min(1000, count - start))  # type: ignore[arg-type]


def started(stack: Stack, where: str = "1=1") -> int:
    return int(
        stack.scalar(
            f"SELECT COUNT(*) FROM job_attempts a JOIN report_jobs j ON j.id = a.job_id WHERE {where}"
        )
    )


async def all_done(stack: Stack, within_s: float) -> None:
    def done() -> bool:
        counts = stack.status_counts()
        return set(counts) == {"done"}

    await eventually(done, within_s, "every job done", 0.2)
    await eventually(lambda: no_slot_held(stack), 10, "no slot left held in Redis", 0.2)


async def test_a_small_tenant_starts_before_a_big_backlog_moves_on(stack: Stack) -> None:
    stack.start_api()
    beta = bearer(stack, "beta")
    async with stack.client(timeout=60) as client:
        await backlog(client, None, 2000)
        workers = [stack.start_worker(WORKER_MAX_JOBS="4") for _ in range(3)]
        slots = 4 * len(workers)
        await eventually(lambda: started(stack) >= 50, 60, "the backlog running", 0.1)
        submitted_at = datetime.now(UTC)
        await post_batch(client, beta, [item("demo.sleep", seconds=0.1)] * 10)
        await eventually(lambda: started(stack, "j.tenant = 'beta'") >= 10, 30, "beta's jobs started", 0.1)
    runs = starts(stack)
    last_beta = max(r.started_at for r in runs if r.tenant == "beta")
    acme_meanwhile = [r for r in runs if r.tenant == "acme" and submitted_at < r.started_at <= last_beta]
    assert len(acme_meanwhile) <= 2 * slots, (len(acme_meanwhile), slots)


async def test_weights_3_to_1_interleave_starts_about_3_to_1(stack: Stack) -> None:
    stack.start_api()
    beta = bearer(stack, "beta")
    async with stack.client(timeout=60) as client:
        await admin_call(client, None, "PATCH", "/v1/tenants/acme", {"weight": 3})
        await backlog(client, None, 300)
        await backlog(client, beta, 300)
        for _ in range(2):
            stack.start_worker(WORKER_MAX_JOBS="4")
        await eventually(lambda: started(stack) >= 160, 60, "160 starts", 0.1)
    first = starts(stack)[:160]
    by_tenant = Counter(r.tenant for r in first)
    ratio = by_tenant["acme"] / by_tenant["beta"]
    assert 2.4 <= ratio <= 3.6, by_tenant


async def test_a_priority_9_job_starts_within_one_freed_slot(stack: Stack) -> None:
    stack.start_api()
    async with stack.client(timeout=60) as client:
        await backlog(client, None, 500)
        for _ in range(2):
            stack.start_worker(WORKER_MAX_JOBS="2")
        await eventually(lambda: started(stack) >= 10, 30, "the backlog running", 0.1)
        submitted_at = datetime.now(UTC)
        urgent = await submit_id(client, None, "demo.sleep", job={"priority": 9}, seconds=0.1)
        submitted_until = datetime.now(UTC)
        await eventually(
            lambda: started(stack, f"j.id = '{urgent}'") == 1, 30, "the urgent job started", 0.05
        )
    runs = starts(stack)
    urgent_start = next(r.started_at for r in runs if r.job_id == urgent)
    overtaking = [r for r in runs if r.priority == 5 and submitted_until < r.started_at < urgent_start]
    assert len(overtaking) <= 1, (overtaking, submitted_at)


async def test_a_type_cap_holds_across_three_workers(stack: Stack) -> None:
    stack.overrides["REPORT_TYPE_MAX_CONCURRENCY"] = json.dumps({"demo.sleep": 2})
    stack.start_api()
    stack.start_scheduler()
    for _ in range(3):
        stack.start_worker(WORKER_MAX_JOBS="3")
    async with stack.client() as client:
        await post_batch(
            client, None, [item("demo.sleep", seconds=0.3)] * 12 + [item("demo.csv", rows=5)] * 6
        )
        await all_done(stack, 60)
    sleeps = starts(stack, "j.report_type = 'demo.sleep'")
    assert len(sleeps) == 12 and most_at_once(sleeps) == 2
    assert most_at_once(starts(stack)) > 2  # the other type was not held back by the cap


async def test_a_tenant_cap_holds_across_workers(stack: Stack) -> None:
    stack.overrides["TENANT_MAX_RUNNING"] = "2"
    stack.start_api()
    stack.start_scheduler()
    beta = bearer(stack, "beta")
    for _ in range(3):
        stack.start_worker(WORKER_MAX_JOBS="3")
    async with stack.client() as client:
        await post_batch(client, None, [item("demo.sleep", seconds=0.3)] * 8)
        await post_batch(client, beta, [item("demo.sleep", seconds=0.3)] * 8)
        await all_done(stack, 60)
    for tenant in ("acme", "beta"):
        assert most_at_once(starts(stack, f"j.tenant = '{tenant}'")) == 2
    assert most_at_once(starts(stack)) > 2


async def test_pausing_a_type_stops_new_starts_within_a_second_and_resuming_starts_them(stack: Stack) -> None:
    stack.start_api()
    stack.start_worker(WORKER_MAX_JOBS="3")
    async with stack.client() as client:
        await post_batch(client, None, [item("demo.sleep", seconds=0.3)] * 30)
        await eventually(lambda: started(stack) >= 3, 30, "jobs running", 0.05)
        paused_at = datetime.now(UTC)
        await pause_type(client, None, "demo.sleep")
        await asyncio.sleep(2.5)
        late = [r for r in starts(stack) if r.started_at > paused_at + timedelta(seconds=1)]
        assert late == [], late
        waiting = stack.scalar("SELECT id FROM report_jobs WHERE status = 'pending' ORDER BY id LIMIT 1")
        job = await get_job(client, None, waiting)
        assert job["waiting_for"] == {"paused": "report_type:demo.sleep"}, job
        await resume_type(client, None, "demo.sleep")
        await all_done(stack, 60)


async def test_a_sigkilled_workers_capped_slots_come_back_after_the_stuck_scan(stack: Stack) -> None:
    stack.overrides["REPORT_TYPE_MAX_CONCURRENCY"] = json.dumps({"demo.sleep": 2})
    stack.start_api()
    victim = stack.start_worker(WORKER_MAX_JOBS="2")
    async with stack.client() as client:
        held = [await submit_id(client, None, "demo.sleep", seconds=8) for _ in range(2)]
        await eventually(lambda: started(stack) == 2, 30, "both capped jobs running in the victim", 0.05)
        stack.start_worker(WORKER_MAX_JOBS="4")
        waiting = [await submit_id(client, None, "demo.sleep", seconds=0.2) for _ in range(2)]
        job = await get_job(client, None, waiting[0])
        assert job["waiting_for"] == {"cap": "report_type:demo.sleep", "limit": 2}, job
        assert stack.status_counts(f"id IN ('{held[0]}', '{held[1]}')") == {"running": 2}
        victim.kill()
        killed_at = datetime.now(UTC)
        stack.start_scheduler()
        await all_done(stack, 90)
    runs = starts(stack)
    assert most_at_once(runs) == 2
    assert stack.scalar("SELECT COUNT(*) FROM job_attempts WHERE outcome = 'lost'") == "2"
    # Both slots came back with the stuck scan, not when the dead worker's lease ran out (minutes).
    first_after = min(r.started_at for r in runs if r.job_id in waiting)
    assert first_after - killed_at < timedelta(seconds=STUCK_AFTER_S + 8), (first_after, killed_at)


async def test_flushing_redis_mid_run_keeps_caps_and_order_and_loses_or_doubles_nothing(stack: Stack) -> None:
    stack.overrides["REPORT_TYPE_MAX_CONCURRENCY"] = json.dumps({"demo.sleep": 2})
    stack.start_api()
    stack.start_scheduler()
    for _ in range(2):
        stack.start_worker(WORKER_MAX_JOBS="3")
    async with stack.client() as client:
        await post_batch(client, None, [item("demo.sleep", seconds=0.4)] * 16)
        await eventually(lambda: stack.status_counts().get("done", 0) >= 4, 30, "4 done", 0.05)
        flushed_at = datetime.now(UTC)
        stack.servers.redis.flushall()
        await all_done(stack, 90)
        assert slots_held(stack)["claims"] == {}
    runs = starts(stack)
    assert Counter(r.job_id for r in runs) == Counter({job_id: 1 for job_id in {r.job_id for r in runs}})
    assert len(runs) == 16
    assert most_at_once(runs) <= 2
    # Claims are made in submission order (one Lua script at a time); two workers that claim a moment apart
    # may write their starts to MySQL a few milliseconds the other way round. Order kept means no job
    # started ahead of an earlier-submitted one by more than that.
    after = sorted(
        (r for r in runs if r.started_at > flushed_at + timedelta(seconds=1)), key=lambda r: r.job_id
    )
    for earlier, later in itertools.pairwise(after):
        assert later.started_at > earlier.started_at - CLAIM_TO_START, (earlier, later)
