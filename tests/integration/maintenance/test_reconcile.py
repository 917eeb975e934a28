"""Reconciliation finds every waiting job Redis does not hold, whatever waits ahead of it: a cursor per status
that comes round a page a tick (reading one index range a page), and after a flush a walk over every page.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from app.core import failpoints, redis_pool
from app.core.config import get_settings
from app.core.db import session_scope
from app.core.states import JobStatus
from app.core.times import utcnow
from app.fairshare import service as fairshare
from app.maintenance import reconcile
from app.maintenance import service as maintenance
from app.maintenance.repository import waiting_page_query
from tests.utils.bulk_jobs import insert_jobs
from tests.utils.jobs import submit_id
from tests.utils.lanes import dropped_by_a_worker, in_a_lane, ready
from tests.utils.workers import drain

SETTLED = timedelta(seconds=10)  # older than the reconciliation's grace for jobs being enqueued right now


async def steady() -> None:
    """Reconciliation as it runs between flushes: one page a status a tick."""
    await ready()
    await redis_pool.save_sweep_state(reconcile.STATE, {reconcile.SWEPT: "1"})


async def test_a_flushed_job_behind_a_paused_backlog_is_queued_again(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await fairshare.set_tenant("slow", {"paused": True})
    await insert_jobs(600, tenant="slow", updated_at=utcnow() - SETTLED)  # older ids: first in id order
    job_id = await submit_id(client, auth, "demo.csv", rows=1)
    env.redis.flushall()
    await asyncio.sleep(maintenance.grace_s())
    for _ in range(2):
        await maintenance.run_tick(use_lease=False)
    assert await in_a_lane([job_id]) == {job_id}
    worker = asyncio.create_task(drain(burst=False, timeout_s=30))
    try:
        done = await client.get(f"/v1/jobs/{job_id}", params={"wait": 10}, headers=auth)
    finally:
        worker.cancel()
    assert done.json()["status"] == "done"


async def test_a_job_left_without_a_message_is_found_within_one_pass_of_the_cursor(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """E.g. a worker cancelled during a start flush hands its attempt back after its message went back to its
    lane and another worker Skipped and deleted it: the cursor comes round to the job within one pass."""
    monkeypatch.setattr(reconcile, "PAGE_ROWS", 10)
    await steady()
    ids = await insert_jobs(35, updated_at=utcnow() - SETTLED)
    per_tick = [await reconcile.reconcile() for _ in range(5)]
    assert per_tick == [10, 10, 10, 5, 0]  # a page a tick, then round again finding every job held
    assert await in_a_lane(ids) == set(ids)
    await dropped_by_a_worker(f"{ids[3]}:0")  # its message ends; MySQL still says pending
    found_after = [await reconcile.reconcile() for _ in range(4)]  # ceil(35 / 10) ticks make one pass
    assert sum(found_after) == 1 and await in_a_lane(ids) == set(ids), found_after


async def test_after_a_flush_one_tick_walks_every_page_of_every_status(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconcile, "PAGE_ROWS", 10)
    await ready()
    settled = utcnow() - SETTLED
    later = utcnow() + timedelta(hours=1)
    pending = await insert_jobs(35, updated_at=settled)
    retrying = await insert_jobs(12, status=JobStatus.RETRYING, updated_at=settled, next_attempt_at=later)
    scheduled = await insert_jobs(3, status=JobStatus.SCHEDULED, updated_at=settled, run_at=later)
    await insert_jobs(40, status=JobStatus.DONE, updated_at=settled)
    assert await reconcile.reconcile() == 50
    assert await in_a_lane(pending + retrying + scheduled) == set(pending + retrying + scheduled)
    pool = await redis_pool.get_pool()
    due_ms = await pool.zscore(get_settings().queue_name, f"{retrying[0]}:0")
    assert due_ms == pytest.approx(later.timestamp() * 1000, abs=1)  # deferred to when it is due
    assert await reconcile.reconcile() == 0  # steady now: a page a status, all held


async def test_a_walk_interrupted_between_pages_goes_on_from_its_cursor(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconcile, "PAGE_ROWS", 10)
    await ready()
    ids = await insert_jobs(35, updated_at=utcnow() - SETTLED)
    with failpoints.armed("reconcile.between_pages", failpoints.raising(RuntimeError("crash"), times=1)):
        with pytest.raises(RuntimeError):
            await reconcile.reconcile()
        assert len(await in_a_lane(ids)) == 10  # the first page, and its cursor, were kept
        assert await reconcile.reconcile() == 25  # the walk goes on from there, to the end
    assert await in_a_lane(ids) == set(ids)
    assert (await redis_pool.sweep_state(reconcile.STATE)).get(reconcile.SWEPT) == "1"


async def test_a_page_reads_one_range_of_the_status_index_whatever_the_backlog(env: Any) -> None:
    settled = utcnow() - SETTLED
    await insert_jobs(3000, status=JobStatus.DONE, updated_at=settled)
    ids = await insert_jobs(6000, updated_at=settled)
    await insert_jobs(3000, status=JobStatus.DONE, updated_at=settled)
    query = waiting_page_query(JobStatus.PENDING, ids[4999], 500)  # a cursor deep into the backlog
    async with session_scope() as session:
        sql = str(query.compile(session.bind, compile_kwargs={"literal_binds": True}))
        plan = json.loads((await session.execute(text("ANALYZE FORMAT=JSON " + sql))).scalar_one())
    reads = {
        (t["table_name"], t["access_type"], t.get("key"), tuple(t.get("used_key_parts", ()))): t["r_rows"]
        for t in tables(plan)
    }
    assert reads == {  # rows read: the page's index entries, then its rows by key (r_rows a loop)
        ("report_jobs", "range", "ix_report_jobs_status_id", ("status", "id")): 500,
        ("<derived2>", "ALL", None, ()): 500,  # the page itself, read back
        ("report_jobs", "eq_ref", "PRIMARY", ("id",)): 1,
        ("blocker", "eq_ref", "PRIMARY", ("id",)): 0,  # a recorded predecessor's, only for a keyed job
    }, json.dumps(plan, indent=1)


def tables(node: Any) -> list[dict[str, Any]]:
    """Every table access in a MariaDB ANALYZE FORMAT=JSON plan."""
    if isinstance(node, list):
        return [t for item in node for t in tables(item)]
    if not isinstance(node, dict):
        return []
    found = [node["table"]] if isinstance(node.get("table"), dict) else []
    return found + [t for value in node.values() for t in tables(value)]


@pytest.mark.timeout(600)
async def test_after_a_flush_100000_pending_jobs_behind_50000_paused_are_back_in_their_lanes_in_two_ticks(
    env: Any,
) -> None:
    await env.set(SCAN_INTERVAL_S="60")  # the default: a tick's walk may run for 48 s
    await fairshare.set_tenant("slow", {"paused": True})
    settled = utcnow() - SETTLED
    await insert_jobs(50_000, tenant="slow", updated_at=settled)
    others = await insert_jobs(50_000, tenant="acme", updated_at=settled)
    env.redis.flushall()
    ticks_s: list[float] = []
    while await in_a_lane(others) != set(others):
        assert len(ticks_s) < 2, f"{len(await in_a_lane(others))} of {len(others)} back after 2 ticks"
        started = time.monotonic()
        await maintenance.run_tick(use_lease=False)
        ticks_s.append(time.monotonic() - started)
    print(
        f"\n100,000 pending, the oldest 50,000 paused: all others back after {len(ticks_s)} tick(s) of",
        end=" ",
    )
    print(", ".join(f"{tick_s:.1f} s" for tick_s in ticks_s))
    assert sum(ticks_s) < 60
