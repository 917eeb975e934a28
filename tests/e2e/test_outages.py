"""Redis and MariaDB restarted under a burst of submissions: no accepted job is lost, no 500 is served."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from typing import Any

import httpx
import pytest

from tests.utils.polling import eventually
from tests.utils.stack import Stack

pytestmark = pytest.mark.timeout(120)

SUBMITTERS = 8
BURST_S = 8.0
REDIS_RESTART_AT_S = 2.0
MARIADB_RESTART_AT_S = 5.0
#: How long each server stays down during its "restart" (a bare stop+start is only ~0.2 s here).
DOWN_S = 1.0


async def test_redis_then_mariadb_restart_during_a_burst_loses_no_accepted_job_and_gives_no_500(
    stack: Stack,
) -> None:
    api = stack.start_api()
    workers = [stack.start_worker(), stack.start_worker()]
    scheduler = stack.start_scheduler()

    statuses: Counter[int] = Counter()
    accepted: list[str] = []
    bad: list[str] = []  # 5xx other than 503, unparseable 503s
    transport_errors: list[str] = []
    readyz: list[tuple[str, int]] = []
    phase = "before"
    stop = asyncio.Event()

    async def submitter(client: httpx.AsyncClient) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            body = {"report_type": "demo.csv", "params": {"rows": 1 + (i % 5)}}
            try:
                resp = await client.post("/v1/jobs", json=body)
            except httpx.HTTPError as exc:
                transport_errors.append(f"{phase}: {exc!r}")
                await asyncio.sleep(0.05)
                continue
            statuses[resp.status_code] += 1
            if resp.status_code == 202:
                accepted.append(resp.json()["id"])
            elif resp.status_code == 503:
                if resp.headers.get("content-type") != "application/problem+json":
                    bad.append(f"{phase}: 503 not problem+json: {resp.text[:300]}")
            else:
                bad.append(f"{phase}: {resp.status_code} {resp.text[:300]}")
            await asyncio.sleep(0.01)

    async def ready_poller(client: httpx.AsyncClient) -> None:
        while not stop.is_set():
            try:
                resp = await client.get("/readyz")
                readyz.append((phase, resp.status_code))
            except httpx.HTTPError as exc:
                transport_errors.append(f"{phase}: /readyz {exc!r}")
            await asyncio.sleep(0.1)

    crashed: list[str] = []

    async def supervisor() -> None:
        """Restart a worker that exits, as systemd or Kubernetes would; the test then fails on `crashed`."""
        while not stop.is_set():
            for i, worker in enumerate(workers):
                if not worker.alive:
                    crashed.append(f"{phase}: {worker.name} exited {worker.returncode}")
                    workers[i] = stack.respawn(worker)
            await asyncio.sleep(0.2)

    def outage(server: Any) -> None:
        server.stop()
        time.sleep(DOWN_S)
        server.start()

    async with stack.client(timeout=30) as client:
        tasks = [asyncio.create_task(submitter(client)) for _ in range(SUBMITTERS)]
        tasks.append(asyncio.create_task(ready_poller(client)))
        tasks.append(asyncio.create_task(supervisor()))
        began = time.monotonic()
        try:
            await asyncio.sleep(REDIS_RESTART_AT_S)
            phase = "redis down"
            await asyncio.to_thread(outage, stack.servers.redis)
            phase = "after redis"
            await asyncio.sleep(max(0.0, MARIADB_RESTART_AT_S - (time.monotonic() - began)))
            phase = "mariadb down"
            await asyncio.to_thread(outage, stack.servers.db)
            phase = "after mariadb"
            await asyncio.sleep(max(0.0, BURST_S - (time.monotonic() - began)))
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)

    api.check_alive()
    scheduler.check_alive()
    assert transport_errors == [], transport_errors[:20]
    assert bad == [], (statuses, bad[:20])
    assert set(statuses) <= {202, 503}, statuses
    assert statuses[202] > 0, statuses
    assert len(set(accepted)) == len(accepted)

    ids = set(accepted)

    def undone() -> set[str]:
        done = {row[0] for row in stack.sql("SELECT id FROM report_jobs WHERE status = 'done'")}
        return ids - done

    try:
        await eventually(lambda: not undone(), 60, f"all {len(ids)} accepted jobs done", interval=0.5)
    except AssertionError:
        left = sorted(undone())
        rows = stack.sql(
            "SELECT id, status, attempt, updated_at FROM report_jobs WHERE id IN ("
            + ",".join(f"'{i}'" for i in left[:20])
            + ")"
        )
        raise AssertionError(f"{len(left)} of {len(ids)} accepted jobs not done; e.g. {rows}") from None
    print(f"statuses={dict(statuses)} readyz={sorted(Counter(readyz).items())} crashed={crashed}")
    assert crashed == [], "workers must ride out Redis and MariaDB restarts without exiting"


RESTARTS = 6


class WorkerCrashed(AssertionError):
    pass


async def test_workers_ride_out_redis_restarts_under_load(stack: Stack) -> None:
    stack.start_api()
    stack.start_scheduler()
    workers = [stack.start_worker(), stack.start_worker()]
    stop = asyncio.Event()

    async def submitter(client: httpx.AsyncClient) -> None:
        while not stop.is_set():
            with contextlib.suppress(httpx.HTTPError):
                await client.post("/v1/jobs", json={"report_type": "demo.csv", "params": {"rows": 1}})
            await asyncio.sleep(0.01)

    def outage() -> None:
        stack.servers.redis.stop()
        time.sleep(0.5)
        stack.servers.redis.start()

    async with stack.client() as client:
        tasks = [asyncio.create_task(submitter(client)) for _ in range(SUBMITTERS)]
        try:
            for n in range(RESTARTS):
                await asyncio.sleep(1.0)
                await asyncio.to_thread(outage)
                # A crashing worker first waits for its running jobs (arq's close()), then exits.
                await asyncio.sleep(1.0)
                dead = [w for w in workers if not w.alive]
                if dead:
                    raise WorkerCrashed(f"restart {n + 1} killed {dead[0].name}:\n{dead[0].tail(12)}")
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
