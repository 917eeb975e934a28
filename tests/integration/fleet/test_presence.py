"""A process's presence in the registry, in-process against real MariaDB and Redis: the heartbeat task, the
arq worker's seam (running jobs counted from arq's own tasks), the scheduler's tick, a database outage.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest

from app.core.config import get_settings
from app.fleet import service
from app.fleet.service import Presence
from devtools.servers import free_port
from tests.utils.fleet import registry_row
from tests.utils.jobs import submit_id
from tests.utils.polling import eventually
from tests.utils.workers import build_worker
from workers import scheduler


async def test_presence_announces_beats_with_the_running_jobs_and_leaves_on_stop(env: Any) -> None:
    await env.set(WORKER_HEARTBEAT_S="0.05")
    running = 0
    presence = Presence("worker", concurrency=3, metrics_port=9200, jobs_running=lambda: running)
    presence.start()
    try:
        await eventually(lambda: presence.process_id, 5, "the announcement", 0.02)
        assert presence.process_id is not None
        process_id = presence.process_id
        running = 2

        async def beat_seen() -> bool:
            row = await registry_row(process_id)
            return row is not None and row["jobs_running"] == 2

        await eventually(beat_seen, 5, "a beat with 2 running jobs", 0.02)
    finally:
        await presence.stop()

    assert await registry_row(process_id) is None
    await presence.beat(ticked=True)  # after stop: writes nothing
    await asyncio.sleep(0.2)
    assert await registry_row(process_id) is None


async def test_presence_rides_out_a_database_outage_and_appears_once_it_is_back(
    env: Any, caplog: pytest.LogCaptureFixture
) -> None:
    real_url = get_settings().database_url.get_secret_value()
    await env.set(WORKER_HEARTBEAT_S="0.05", DATABASE_URL=f"mysql+asyncmy://u:p@127.0.0.1:{free_port()}/none")
    presence = Presence("dead_letter", concurrency=20)
    with caplog.at_level(logging.WARNING, logger="app.fleet.service"):
        presence.start()
        try:
            await eventually(
                lambda: "heartbeat failed (database unavailable)" in caplog.text, 10, "the warning", 0.02
            )
            await asyncio.sleep(0.3)  # several failed beats: still running, warned once
            assert presence.beating
            assert caplog.text.count("heartbeat failed") == 1

            await env.set(DATABASE_URL=real_url)
            await eventually(lambda: service.list_processes(include_gone=False), 10, "the row", 0.05)
        finally:
            await presence.stop()
    assert await service.list_processes(include_gone=True) == []


async def test_an_arq_worker_reports_its_running_jobs_and_leaves_when_closed(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(WORKER_HEARTBEAT_S="0.05")
    worker = build_worker(registry_kind="worker", max_jobs=4)
    await submit_id(client, auth, "demo.sleep", seconds=1.0)
    run = asyncio.create_task(worker.main())
    try:

        async def one_running() -> bool:
            listed = await service.list_processes(include_gone=False)
            return len(listed) == 1 and listed[0].row.jobs_running == 1

        await eventually(one_running, 10, "the worker listed with one running job", 0.02)
        [listed] = await service.list_processes(include_gone=False)
        assert listed.row.kind == "worker" and listed.row.concurrency == 4
        await asyncio.wait_for(run, 30)  # a burst worker: ends once the queue is empty
    finally:
        await worker.close()
    assert await service.list_processes(include_gone=True) == []


async def test_a_scheduler_tick_records_last_tick_at(env: Any) -> None:
    presence = Presence("scheduler", concurrency=0)
    try:
        await scheduler.tick(presence)
        assert presence.process_id is not None
        first = await registry_row(presence.process_id)
        assert first is not None and first["last_tick_at"] is not None
        await scheduler.tick(presence)  # skipped (the first still holds the lease), yet a tick of this loop
        second = await registry_row(presence.process_id)
        assert second is not None and second["last_tick_at"] > first["last_tick_at"]
    finally:
        await presence.stop()
