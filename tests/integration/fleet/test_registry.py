"""The registry's use cases on real MariaDB: beat, leave, re-insert after a purge, purge, gauge counts."""

from __future__ import annotations

import asyncio
from typing import Any

from app.fleet import service
from app.maintenance import service as maintenance
from tests.utils.fleet import registry_row, silence


async def test_a_beat_records_the_heartbeat_and_the_running_jobs(env: Any) -> None:
    process_id = await service.announce("worker", concurrency=5, metrics_port=None)
    announced = await registry_row(process_id)
    assert announced is not None and announced["jobs_running"] == 0
    await asyncio.sleep(0.01)

    await service.beat(process_id, jobs_running=3)

    row = await registry_row(process_id)
    assert row is not None
    assert row["jobs_running"] == 3 and row["last_heartbeat_at"] > announced["last_heartbeat_at"]
    assert row["last_tick_at"] is None


async def test_a_ticked_beat_records_the_tick(env: Any) -> None:
    process_id = await service.announce("scheduler", concurrency=0, metrics_port=None)
    await service.beat(process_id, jobs_running=0, ticked=True)
    row = await registry_row(process_id)
    assert row is not None and row["last_tick_at"] == row["last_heartbeat_at"]
    assert await service.last_tick_at() is not None


async def test_leaving_deletes_the_row(env: Any) -> None:
    process_id = await service.announce("dead_letter", concurrency=20, metrics_port=None)
    await service.leave(process_id)
    assert await registry_row(process_id) is None
    assert await service.list_processes(include_gone=True) == []


async def test_a_process_that_outlived_a_purge_reappears_as_it_announced_at_its_next_beat(env: Any) -> None:
    process_id = await service.announce("worker", concurrency=7, metrics_port=9100)
    before = await registry_row(process_id)
    await silence(process_id, 2 * 86400)
    assert await service.purge_gone() == 1
    assert await registry_row(process_id) is None

    await service.beat(process_id, jobs_running=2)

    after = await registry_row(process_id)
    assert after is not None and before is not None
    for column in ("name", "kind", "host", "pid", "version", "started_at", "concurrency", "metrics_port"):
        assert after[column] == before[column], column
    assert after["jobs_running"] == 2
    [listed] = await service.list_processes(include_gone=False)
    assert listed.row.id == process_id and listed.state == "live"


async def test_the_scheduler_tick_purges_rows_silent_for_over_a_day_and_keeps_the_others(env: Any) -> None:
    old = await service.announce("worker", concurrency=1, metrics_port=None)
    recent_gone = await service.announce("worker", concurrency=1, metrics_port=None)
    live = await service.announce("scheduler", concurrency=0, metrics_port=None)
    await silence(old, 86400 + 60)
    await silence(recent_gone, 86400 - 60)

    report = await maintenance.run_tick(use_lease=False)

    assert report["workers_purged"] == 1
    assert await registry_row(old) is None
    assert await registry_row(recent_gone) is not None and await registry_row(live) is not None


async def test_live_counts_cover_every_kind_and_leave_out_gone_processes(env: Any) -> None:
    await service.announce("worker", concurrency=1, metrics_port=None)
    await service.announce("worker", concurrency=1, metrics_port=None)
    await service.announce("scheduler", concurrency=0, metrics_port=None)
    gone = await service.announce("dead_letter", concurrency=20, metrics_port=None)
    await silence(gone, 60)

    assert await service.live_counts() == {"worker": 2, "dead_letter": 0, "scheduler": 1}


async def test_last_tick_at_is_the_latest_tick_of_any_scheduler(env: Any) -> None:
    assert await service.last_tick_at() is None
    first = await service.announce("scheduler", concurrency=0, metrics_port=None)
    second = await service.announce("scheduler", concurrency=0, metrics_port=None)
    await service.beat(first, 0, ticked=True)
    await asyncio.sleep(0.01)
    await service.beat(second, 0, ticked=True)
    row = await registry_row(second)
    last_tick_at = await service.last_tick_at()
    assert row is not None and last_tick_at is not None
    assert last_tick_at.replace(tzinfo=None) == row["last_tick_at"]  # stored as naive UTC
