"""The gauges' snapshot: one database round per METRICS_CACHE_S at most, and once warm a scrape never waits
for the database (a stale snapshot is served while one refresh runs behind it)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.utils.jobs import submit


async def pending(client: httpx.AsyncClient) -> int:
    from app.observability import service

    snap = await service.snapshot()
    return sum(row.count for row in snap.live_jobs if row.status == "pending")


async def test_a_stale_snapshot_is_served_while_it_refreshes(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    from app.observability import service

    await env.set(METRICS_CACHE_S="5")
    assert await pending(client) == 0
    await submit(client, auth, "demo.csv", rows=1)
    assert await pending(client) == 0  # fresh for 5 s: no second round
    service._cache.monotonic_at -= 6  # five seconds later
    assert await pending(client) == 0  # stale, served at once; the refresh runs behind it
    refreshing = service._cache.refreshing
    assert refreshing is not None
    await refreshing
    assert await pending(client) == 1


async def test_no_cache_reads_every_time(client: httpx.AsyncClient, auth: dict[str, str], env: Any) -> None:
    await env.set(METRICS_CACHE_S="0")
    assert await pending(client) == 0
    await submit(client, auth, "demo.csv", rows=1)
    assert await pending(client) == 1
