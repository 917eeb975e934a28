"""Metrics phase (issue 12): submit and drain throughput with METRICS_ENABLED on vs off, interleaved and
scraped as Prometheus would; then /metrics over 1,000,000 job rows, uncached and cached, and its reads."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Awaitable, Sequence
from datetime import timedelta
from typing import Any

from bench.common import SCALE, WARMUP_SECONDS, log, pct
from bench.context import ApiServer, Bench
from bench.metrics_figures import (
    TARGET_PCT,
    describe,
    family_total,
    latency_summary,
    scrape_summary,
    side_figures,
)
from bench.metrics_fill import FILL_ROWS, LIVE_ROWS, SCRAPE_TARGET_ROWS, fill
from bench.phases import drain, submit

PAIRS = 3
SUBMIT_SECONDS = float(max(2, math.ceil(5 * min(SCALE, 1.0))))  # whole seconds: wrk's -d takes no fraction
DRAIN_JOBS = max(200, round(3_000 * SCALE))
DRAIN_WORKERS = 1  # one worker process: its CPU per job is what the counters add to
SCRAPE_EVERY_S = 5.0  # Prometheus's scrape interval during the throughput runs
SCRAPE_TARGET_MS = 50.0  # issue 12: one scrape of the API's /metrics with 1,000,000 job rows
SCRAPES = max(50, round(200 * min(SCALE, 1.0)))
STATE_ROUNDS = max(20, round(50 * min(SCALE, 1.0)))
SCRAPE_TIMEOUT_S = 10.0
OFF = {"METRICS_ENABLED": "false", "METRICS_PORT": "0"}


# ---- throughput, on vs off ----------------------------------------------------------------------------


def order() -> list[str]:
    """on, off, off, on, on, off …: each side goes first in every other pair (linear drift cancels)."""
    sides: list[str] = []
    for i in range(PAIRS):
        sides += ["on", "off"] if i % 2 == 0 else ["off", "on"]
    return sides


@contextlib.asynccontextmanager
async def scraping(urls: Sequence[str]) -> AsyncIterator[dict[str, Any]]:
    """Prometheus's part while the body runs: GET each of `urls` every SCRAPE_EVERY_S, from the start.

    Yields {url: {"ok_ms": [...], "failed": n, "last": body}}; failures before a target's first answer (a
    worker still starting) are not counted."""
    import httpx

    seen: dict[str, Any] = {url: {"ok_ms": [], "failed": 0, "last": ""} for url in urls}

    async def loop(client: httpx.AsyncClient) -> None:
        while True:
            for url in urls:
                began = time.perf_counter()
                try:
                    resp = await client.get(url)
                    resp.raise_for_status()
                except httpx.HTTPError:
                    if seen[url]["ok_ms"]:
                        seen[url]["failed"] += 1
                    continue
                seen[url]["ok_ms"].append(round((time.perf_counter() - began) * 1000, 2))
                seen[url]["last"] = resp.text
            await asyncio.sleep(SCRAPE_EVERY_S)

    async with httpx.AsyncClient(timeout=SCRAPE_TIMEOUT_S) as client:
        task = asyncio.create_task(loop(client)) if urls else None
        try:
            yield seen
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


async def submit_run(bench: Bench, api: ApiServer, side: str) -> dict[str, Any]:
    await bench.clean()
    urls = [f"{api.base_url}/metrics"] if side == "on" else []
    async with scraping(urls) as seen:
        fig = await submit.load(bench, "/v1/jobs", SUBMIT_SECONDS, api)
    fig["side"] = side
    fig["scrapes"] = scrape_summary(seen, "reports_jobs_submitted_total")
    return fig


async def drain_run(bench: Bench, api: ApiServer, side: str) -> dict[str, Any]:
    from devtools.servers import free_port

    if side == "on":
        port = free_port()
        env = {"METRICS_ENABLED": "true", "METRICS_PORT": str(port)}
        urls = [f"http://127.0.0.1:{port}/metrics", f"{api.base_url}/metrics"]
    else:
        env, urls = dict(OFF), []
    async with scraping(urls) as seen:
        fig = await drain.drain_ours(bench, DRAIN_WORKERS, DRAIN_JOBS, f"metrics-{side}-", **env)
    fig["side"] = side
    fig["scrapes"] = scrape_summary(seen, "reports_attempts_finished_total", outcome="succeeded")
    return fig


async def throughput(bench: Bench) -> dict[str, Any]:
    sides = order()
    log(f"metrics: submit {SUBMIT_SECONDS:g} s and drain {DRAIN_JOBS} jobs, metrics on vs off, "
        f"{PAIRS} pairs in the order {', '.join(sides)}")  # fmt: skip
    import httpx

    api_on = await bench.launch_api("api-metrics-on", METRICS_ENABLED="true")
    try:
        api_off = await bench.launch_api("api-metrics-off", 1, **OFF)
        try:
            apis = {"on": api_on, "off": api_off}
            for api in apis.values():
                await submit.load(bench, "/v1/jobs", WARMUP_SECONDS, api)
            submits: list[dict[str, Any]] = []
            for side in sides:
                submits.append(await submit_run(bench, apis[side], side))
                log(f"  submit, metrics {side}: {submits[-1]['ok_rps']:,.0f} accepted/s")
            async with httpx.AsyncClient(timeout=SCRAPE_TIMEOUT_S) as client:
                off_body = (await client.get(f"{api_off.base_url}/metrics")).text
        finally:
            api_off.proc.stop()
        drains: list[dict[str, Any]] = []
        for side in sides:  # the API with metrics on stays up: Prometheus scrapes it during the "on" drains
            drains.append(await drain_run(bench, api_on, side))
            log(f"  drain, metrics {side}: {drains[-1]['jobs_per_s']:,.0f} jobs/s")
    finally:
        api_on.proc.stop()
    out: dict[str, Any] = {
        "order": sides,
        "submit_seconds": SUBMIT_SECONDS,
        "drain_jobs": DRAIN_JOBS,
        "drain_workers": DRAIN_WORKERS,
        "scrape_every_s": SCRAPE_EVERY_S,
        "target_pct": TARGET_PCT,
        "submit": side_figures(submits, "ok_rps"),
        "drain": side_figures(drains, "jobs_per_s"),
        "off_api_counted_submits": family_total(off_body, "reports_jobs_submitted_total"),
    }
    log(describe("submit", out["submit"], "accepted/s"))
    log(describe("drain", out["drain"], "jobs/s"))
    return out


# ---- the scrape with a million job rows ---------------------------------------------------------------


async def time_scrapes(api: ApiServer, n: int) -> dict[str, Any]:
    """n GET /metrics back to back on one connection; the first (cold) one is reported apart."""
    import httpx

    ms: list[float] = []
    async with httpx.AsyncClient(base_url=api.base_url, timeout=SCRAPE_TIMEOUT_S) as client:
        for _ in range(n + 1):
            began = time.perf_counter()
            resp = await client.get("/metrics")
            ms.append((time.perf_counter() - began) * 1000)
            if resp.status_code != 200:
                raise RuntimeError(f"/metrics answered {resp.status_code}: {resp.text[:300]}")
    body = resp.text
    if family_total(body, "reports_state_up") != 1.0:
        raise RuntimeError(f"/metrics: reports_state_up is not 1:\n{api.proc.tail()}")
    series = sum(1 for line in body.splitlines() if line.startswith("reports_jobs{"))
    return dict(
        latency_summary(ms[1:]),
        first_ms=round(ms[0], 2),
        body_bytes=len(resp.content),
        reports_jobs_series=series,
        reports_jobs_total=family_total(body, "reports_jobs"),
        dead_letters_open=family_total(body, "reports_dead_letters_open"),
    )


async def state_round(bench: Bench) -> dict[str, Any]:
    """The state reads alone, in this process (no HTTP, no exposition): the whole round and each query,
    and EXPLAIN of every SELECT the round sends."""
    from sqlalchemy import event

    from app.core.config import get_settings
    from app.core.db import get_engine, session_scope
    from app.core.times import utcnow
    from app.dead_letters.repository import DeadLetterRepository
    from app.fleet.repository import FleetRepository
    from app.observability.repository import StateRepository
    from app.observability.service import take_snapshot

    engine = get_engine()
    captured: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            captured.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", capture)
    try:
        await take_snapshot()
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", capture)
    rounds: list[float] = []
    for _ in range(STATE_ROUNDS):
        began = time.perf_counter()
        snap = await take_snapshot()
        rounds.append((time.perf_counter() - began) * 1000)
    if not snap.ok:
        raise RuntimeError("take_snapshot() failed: see the API's log")
    per_query: dict[str, list[float]] = {}

    async def timed(name: str, call: Awaitable[object]) -> None:
        began = time.perf_counter()
        await call
        per_query.setdefault(name, []).append((time.perf_counter() - began) * 1000)

    live_for = timedelta(seconds=get_settings().worker_live_for_s)
    for _ in range(STATE_ROUNDS):
        now = utcnow()
        async with session_scope() as session:
            state, fleet = StateRepository(session), FleetRepository(session)
            letters = DeadLetterRepository(session)
            await timed("live_jobs", state.live_jobs(now))
            await timed("open_dead_letters", letters.open_letters(None))
            await timed("pending_alerts", state.pending_alerts())
            await timed("pending_callbacks", state.pending_callbacks())
            await timed("live_workers", fleet.live_counts(now - live_for))
            await timed("last_tick", fleet.last_tick_at())
    explains: list[dict[str, Any]] = []
    async with engine.connect() as conn:
        for statement, parameters in captured:
            params = tuple(parameters) if isinstance(parameters, list) else parameters
            rows = (await conn.exec_driver_sql("EXPLAIN " + statement, params)).mappings().all()
            explains.append({
                "sql": " ".join(statement.split())[:160],
                "plan": [
                    {k: r.get(k) for k in ("table", "type", "key", "rows", "Extra")} for r in rows
                ],
            })  # fmt: skip
        query_cache = (await conn.exec_driver_sql("SELECT @@query_cache_type")).scalar()
    return {
        "round": latency_summary(rounds),
        "queries_p50_ms": {name: round(pct(ms, 50), 2) for name, ms in per_query.items()},
        "explain": explains,
        "query_cache_type": str(query_cache),
    }


async def scrape_cost(bench: Bench) -> dict[str, Any]:
    log(f"metrics: fill report_jobs with {FILL_ROWS:,} rows ({LIVE_ROWS:,} live) in bulk SQL")
    await bench.clean()
    filled = await fill(bench)
    log(f"  filled in {filled['seconds']:.1f} s ({filled['rows_per_s']:,} rows/s; report_jobs "
        f"{filled['report_jobs_mb']} MB with indexes): {filled['by_status']}")  # fmt: skip
    uncached = await bench.launch_api("api-metrics-uncached", METRICS_CACHE_S="0")
    cached = await bench.launch_api("api-metrics-cached", METRICS_CACHE_S="5")
    try:
        log(f"  {SCRAPES} scrapes of GET /metrics, uncached (METRICS_CACHE_S=0) and cached (5 s)")
        out: dict[str, Any] = {
            "target_ms": SCRAPE_TARGET_MS,
            "target_rows": SCRAPE_TARGET_ROWS,
            "fill": filled,
            "uncached": await time_scrapes(uncached, SCRAPES),
            "cached": await time_scrapes(cached, SCRAPES),
        }
    finally:
        uncached.proc.stop()
        cached.proc.stop()
    out["state_round"] = await state_round(bench)
    u, c, s = out["uncached"], out["cached"], out["state_round"]["round"]
    log(f"  uncached p50 {u['p50_ms']:.1f} ms p95 {u['p95_ms']:.1f} ms max {u['max_ms']:.1f} ms; cached p50 "
        f"{c['p50_ms']:.1f} ms p95 {c['p95_ms']:.1f} ms; state reads alone p50 {s['p50_ms']:.1f} ms "
        f"({u['reports_jobs_series']} reports_jobs series, {u['body_bytes']:,} bytes)")  # fmt: skip
    for plan in out["state_round"]["explain"]:
        steps = "; ".join(f"{p['table']} {p['type']} key={p['key']} rows={p['rows']}" for p in plan["plan"])
        log(f"    EXPLAIN {plan['sql'][:60]}…: {steps}")
    return out


async def run(bench: Bench) -> None:
    began = time.perf_counter()
    res: dict[str, Any] = await throughput(bench)
    res["scrape"] = await scrape_cost(bench)
    res["seconds"] = round(time.perf_counter() - began, 1)
    bench.results["metrics"] = res
    log(f"  metrics phase took {res['seconds']:.0f} s")
