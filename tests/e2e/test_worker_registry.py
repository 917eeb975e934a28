"""The worker registry with real processes: they appear in GET /v1/workers, a SIGKILLed one leaves the live
list within 2 heartbeats, a SIGTERMed one at once, and the scheduler's ticks show in `last_tick_at`.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from typing import Any

import httpx
import pytest

from devtools.servers import free_port
from tests.utils.fleet import list_workers
from tests.utils.polling import eventually
from tests.utils.stack import PYTHON, ROOT, Proc, Stack

pytestmark = pytest.mark.timeout(120)

HEARTBEAT_S = 0.5


@pytest.fixture
def fast_stack(stack: Stack) -> Stack:
    """Every process beats every HEARTBEAT_S (the API judges liveness by the same setting)."""
    stack.overrides["WORKER_HEARTBEAT_S"] = str(HEARTBEAT_S)
    return stack


async def listed(client: httpx.AsyncClient, proc: Proc, state: str = "live") -> dict[str, Any] | None:
    """The registry entry of `proc` (by pid), or None."""
    return next((w for w in await list_workers(client, None, state) if w["pid"] == proc.pid), None)


async def test_a_worker_is_listed_and_a_sigkilled_one_leaves_the_live_list_within_two_heartbeats(
    fast_stack: Stack,
) -> None:
    fast_stack.start_api()
    metrics_port = free_port()
    worker = fast_stack.start_worker(WORKER_MAX_JOBS="3", METRICS_PORT=str(metrics_port))
    async with fast_stack.client() as client:
        entry = await eventually(lambda: listed(client, worker), 10, "the worker listed", 0.05)
        assert entry["kind"] == "worker" and entry["concurrency"] == 3 and entry["state"] == "live"
        assert entry["name"].endswith(f":{worker.pid}") and entry["metrics_port"] == metrics_port
        async with httpx.AsyncClient(trust_env=False) as scraper:
            assert (await scraper.get(f"http://127.0.0.1:{metrics_port}/metrics")).status_code == 200

        worker.kill()
        killed_at = time.monotonic()
        while await listed(client, worker) is not None:
            assert time.monotonic() - killed_at <= 2 * HEARTBEAT_S, "still live 2 heartbeats after SIGKILL"
            await asyncio.sleep(0.02)
        gone = await listed(client, worker, state="all")
        assert gone is not None and gone["state"] == "gone"


async def test_a_worker_stopped_with_sigterm_leaves_the_registry_at_once(fast_stack: Stack) -> None:
    fast_stack.start_api()
    worker = fast_stack.start_worker()
    async with fast_stack.client() as client:
        await eventually(lambda: listed(client, worker), 10, "the worker listed", 0.05)
        assert await asyncio.to_thread(worker.terminate, 20) == 0, worker.tail()
        assert await listed(client, worker, state="all") is None


async def test_the_dead_letter_consumer_and_the_scheduler_are_listed_and_the_ticks_advance(
    fast_stack: Stack,
) -> None:
    fast_stack.start_api()
    consumer = fast_stack.start_dead_letter()
    scheduler = fast_stack.start_scheduler()
    async with fast_stack.client() as client:
        entry = await eventually(lambda: listed(client, consumer), 10, "the consumer listed", 0.05)
        assert entry["kind"] == "dead_letter" and entry["last_tick_at"] is None

        async def last_tick_at() -> str | None:
            found = await listed(client, scheduler)
            assert found is None or found["kind"] == "scheduler", found
            return None if found is None else found["last_tick_at"]

        first = await eventually(last_tick_at, 10, "a scheduler tick", 0.05)

        async def advanced() -> bool:
            latest = await last_tick_at()
            return latest is not None and latest > first  # same-format RFC 3339 stamps sort as text

        await eventually(advanced, 10, "last_tick_at advancing (SCAN_INTERVAL_S=0.5)", 0.1)


async def test_reportctl_workers_prints_the_live_processes_as_a_table(fast_stack: Stack) -> None:
    fast_stack.start_api()
    worker = fast_stack.start_worker(WORKER_MAX_JOBS="2")
    async with fast_stack.client() as client:
        await eventually(lambda: listed(client, worker), 10, "the worker listed", 0.05)
    argv = [PYTHON, "-m", "app.cli", "workers", "--api-url", fast_stack.api_url]
    done = await asyncio.to_thread(
        subprocess.run,
        [*argv, "--api-key", fast_stack.api_key],
        cwd=ROOT,
        env=fast_stack.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == [
        "NAME", "KIND", "VERSION", "STARTED", "CONCURRENCY", "RUNNING", "HEARTBEAT_AGE_S", "STATE",
    ]  # fmt: skip
    [row] = [r.split() for r in rows if r.split()[0].endswith(f":{worker.pid}")]
    # STARTED is "date time": two words.
    _name, kind, _version, _date, _time, concurrency, running, age_s, state = row
    assert (kind, concurrency, running, state) == ("worker", "2", "0", "live"), row
    assert 0 <= float(age_s) <= 2 * HEARTBEAT_S
