"""Schedules against real processes: a 2 s cron fires on time, once per fire time across two scheduler
replicas and a Redis flush, its report sees `scheduled_for`; a stopped scheduler catches up with run_once.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.utils.polling import eventually
from tests.utils.stack import Stack

pytestmark = pytest.mark.timeout(120)

EVERY_2_S = "*/2 * * * * *"
ON_TIME_S = 1.0


def _ts(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)


def _jobs(stack: Stack, schedule_id: str) -> list[dict[str, Any]]:
    rows = stack.sql(
        "SELECT id, status, scheduled_for, started_at FROM report_jobs "
        f"WHERE schedule_id = '{schedule_id}' ORDER BY scheduled_for"
    )
    return [{"id": r[0], "status": r[1], "scheduled_for": _ts(r[2]), "started_at": r[3]} for r in rows]


async def _start(*starters: Callable[[], Any]) -> None:
    """Start processes of different kinds side by side (each waits for its own readiness)."""
    await asyncio.gather(*(asyncio.to_thread(start) for start in starters))


async def _create(stack: Stack, **fields: Any) -> str:
    body = {
        "name": "every-two-seconds",
        "report_type": "demo.sleep",
        "params": {"seconds": 0},
        "cron": EVERY_2_S,
        **fields,
    }
    async with stack.client() as client:
        resp = await client.post("/v1/schedules", json=body)
    assert resp.status_code == 201, resp.text
    return str(resp.json()["id"])


async def _pause(stack: Stack, schedule_id: str) -> None:
    async with stack.client() as client:
        resp = await client.post(f"/v1/schedules/{schedule_id}/pause")
    assert resp.status_code == 200, resp.text


async def test_two_second_cron_runs_each_fire_once_within_1s_across_replicas_and_a_redis_flush(
    stack: Stack,
) -> None:
    await _start(stack.start_api, stack.start_worker, stack.start_scheduler)
    sid = await _create(stack)
    # The second replica joins while the schedule already fires.
    await asyncio.gather(_start(stack.start_scheduler), asyncio.sleep(7))
    flushed_at = datetime.now(UTC)
    stack.servers.redis.flushall()
    await asyncio.sleep(4)
    await _pause(stack, sid)

    def all_done() -> bool:
        jobs = _jobs(stack, sid)
        return bool(jobs) and all(j["status"] == "done" for j in jobs)

    await eventually(all_done, 20, "every fired job done")
    for proc in stack.procs:
        proc.check_alive()

    jobs = _jobs(stack, sid)
    per_fire = Counter(j["scheduled_for"] for j in jobs)
    assert {f: n for f, n in per_fire.items() if n != 1} == {}, "one job per fire time"
    fires = sorted(per_fire)
    assert len(fires) >= 5, fires
    assert all(b - a == timedelta(seconds=2) for a, b in itertools.pairwise(fires)), fires
    runs = stack.sql(f"SELECT fire_time, result FROM schedule_runs WHERE schedule_id = '{sid}'")
    assert len(runs) == len(jobs) and {r[1] for r in runs} == {"submitted"}

    before_flush = [j for j in jobs if j["scheduled_for"] < flushed_at - timedelta(seconds=0.5)]
    assert len(before_flush) >= 3
    late = {
        j["scheduled_for"].isoformat(): (_ts(j["started_at"]) - j["scheduled_for"]).total_seconds()
        for j in before_flush
        if (_ts(j["started_at"]) - j["scheduled_for"]).total_seconds() > ON_TIME_S
    }
    assert late == {}, f"fires started late (s): {late}"

    # The report function saw the nominal fire time.
    job = jobs[0]
    async with stack.client() as client:
        resp = await client.get(f"/v1/jobs/{job['id']}/output")
        assert resp.status_code == 200, resp.text
        assert f"scheduled_for {job['scheduled_for'].isoformat()}" in resp.text
        body = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert body["schedule_id"] == sid
    assert body["scheduled_for"].startswith(job["scheduled_for"].strftime("%Y-%m-%dT%H:%M:%S"))


async def test_run_once_after_the_scheduler_missed_three_fires_submits_only_the_latest(
    stack: Stack,
) -> None:
    await _start(stack.start_api, stack.start_worker)
    scheduler = stack.start_scheduler()
    sid = await _create(stack, missed_runs="run_once", overlap="allow")

    def last_fire() -> datetime | None:
        rows = stack.sql(f"SELECT MAX(fire_time) FROM schedule_runs WHERE schedule_id = '{sid}'")
        return _ts(rows[0][0]) if rows and rows[0][0] != "NULL" else None

    await eventually(last_fire, 10, "a first fire")
    scheduler.terminate()
    stopped_after = last_fire()
    assert stopped_after is not None
    # Three fires pass with no scheduler: at +2, +4 and +6 s.
    await asyncio.sleep(
        max(0.0, (stopped_after + timedelta(seconds=6.1) - datetime.now(UTC)).total_seconds())
    )
    started = time.monotonic()
    stack.start_scheduler()

    def catch_up() -> list[list[str]]:
        rows = stack.sql(
            "SELECT fire_time, result, IFNULL(reason, ''), IFNULL(job_id, ''), created_at FROM schedule_runs "
            f"WHERE schedule_id = '{sid}' AND fire_time > '{stopped_after:%Y-%m-%d %H:%M:%S.%f}' "
            "ORDER BY fire_time"
        )
        return [r for r in rows if r[4] == rows[0][4]] if rows else []

    batch = await eventually(catch_up, 15, "the catch-up fires recorded")
    startup_s = time.monotonic() - started
    await _pause(stack, sid)
    fires = [_ts(r[0]) for r in batch]
    # At least the three fires slept through; the scheduler's start-up (a few seconds) may add more.
    assert len(batch) >= 3, (batch, startup_s)
    assert fires == [stopped_after + timedelta(seconds=2 * (i + 1)) for i in range(len(batch))]
    assert [(r[1], r[2]) for r in batch[:-1]] == [("skipped", "missed")] * (len(batch) - 1)
    assert batch[-1][1:3] == ["submitted", ""] and batch[-1][3]
    job_id = batch[-1][3]

    def done() -> bool:
        return stack.scalar(f"SELECT status FROM report_jobs WHERE id = '{job_id}'") == "done"

    await eventually(done, 15, "the catch-up job done")
    jobs = stack.sql(
        f"SELECT id, scheduled_for FROM report_jobs WHERE schedule_id = '{sid}' "
        f"AND scheduled_for > '{stopped_after:%Y-%m-%d %H:%M:%S.%f}' AND scheduled_for <= "
        f"'{fires[-1]:%Y-%m-%d %H:%M:%S.%f}'"
    )
    assert [(r[0], _ts(r[1])) for r in jobs] == [(job_id, fires[-1])]
