"""The scale phase's measurements at one table size: the reads (job list pages, /metrics uncached, the console
overview), a scheduler tick, single and bulk submit, the drain by real workers, the purge rate and the
recovery after a FLUSHALL; each with the rows MariaDB read for it (bench/scale_probe.py).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.common import BULK_BATCH, JOB_BODY, log
from bench.context import ApiServer, Bench
from bench.phases.drain import DRAIN_WORKERS, watch
from bench.procs import CpuMeter
from bench.scale_fill import NO_TYPE, RARE_TYPE
from bench.scale_probe import (
    REQUEST_TIMEOUT_S,
    Counters,
    checked,
    in_lanes,
    messages_held,
    repeat,
    rows_figure,
)

LIST_PAGES = {
    "list_first_page": "/v1/jobs",
    "list_status_done": "/v1/jobs?status=done",
    "list_rare_type": f"/v1/jobs?report_type={RARE_TYPE}",
    "list_no_match": f"/v1/jobs?report_type={NO_TYPE}",
}
READ_FIGURES = (*LIST_PAGES, "metrics_uncached", "console_overview")
READ_REPEATS = 20
TICKS = 3
SINGLE_SUBMITS = 200
SINGLE_WARM_UP = 10
MAX_RECOVERY_TICKS = 6
MAX_PURGE_CALLS = 100_000


def _client(api: ApiServer, api_key: str | None = None) -> Any:
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.AsyncClient(base_url=api.base_url, headers=headers, timeout=REQUEST_TIMEOUT_S)


async def reads(bench: Bench, api: ApiServer, counters: Counters) -> dict[str, Any]:
    """The first page and three filtered pages of GET /v1/jobs with the big tenant's key, GET /metrics
    (the API runs with METRICS_CACHE_S=0) and the console overview's refresh, each alone on an idle system."""
    from bench.scale_probe import console_login

    out: dict[str, Any] = {}
    async with _client(api, bench.api_key) as client:
        for name, path in LIST_PAGES.items():

            async def one(path: str = path) -> None:
                checked(await client.get(path), f"GET {path}")

            out[name] = await repeat(counters, one, READ_REPEATS)
            out[name]["path"] = path
            out[name]["items"] = len(checked(await client.get(path), path).json().get("items", []))
    async with _client(api) as client:

        async def scrape() -> None:
            checked(await client.get("/metrics"), "GET /metrics")

        out["metrics_uncached"] = await repeat(counters, scrape, READ_REPEATS)
        await console_login(client, bench.api_key)

        async def overview() -> None:
            checked(await client.get("/ui/", headers={"X-Console-Refresh": "1"}), "GET /ui/ (overview)")

        out["console_overview"] = await repeat(counters, overview, READ_REPEATS)
    return out


async def ticks(counters: Counters, explain: bool = False) -> dict[str, Any]:
    """`run_tick(use_lease=False)` in this process against the bench's servers, TICKS times back to back;
    with `explain`, the statements of those very ticks replayed under ANALYZE afterwards ("explain")."""
    from app.maintenance.service import run_tick
    from bench.scale_explain import captured, replay

    reports: list[dict[str, Any]] = []

    async def one() -> None:
        reports.append(await run_tick(use_lease=False))

    async def measured() -> dict[str, Any]:
        return await repeat(counters, one, TICKS, warm_up=0, time_box_s=600.0)

    if explain:
        fig, statements = await captured(measured)
        fig["explain"] = await replay(statements)
    else:
        fig = await measured()
    fig["last_report"] = reports[-1]
    return fig


async def submits(bench: Bench, api: ApiServer, counters: Counters, bulk_jobs: int) -> dict[str, Any]:
    """SINGLE_SUBMITS POST /v1/jobs one after another (after SINGLE_WARM_UP), then `bulk_jobs` in POST
    /v1/jobs/batch of BULK_BATCH, one request at a time; the jobs stay queued for the drain."""
    from bench.phases.bulk import PATH, batch_body

    first_id: list[str] = []
    body = batch_body(BULK_BATCH)
    async with _client(api, bench.api_key) as client:
        headers = {"Content-Type": "application/json"}

        async def single() -> None:
            resp = await client.post("/v1/jobs", content=JOB_BODY, headers=headers)
            if resp.status_code != 202:
                raise RuntimeError(f"POST /v1/jobs answered {resp.status_code}: {resp.text[:300]}")
            if not first_id:
                first_id.append(resp.json()["id"])

        single_fig = await repeat(counters, single, SINGLE_SUBMITS, warm_up=SINGLE_WARM_UP, time_box_s=120)

        async def batch() -> None:
            resp = await client.post(PATH, content=body, headers=headers)
            if resp.status_code != 207 or resp.json().get("created") != BULK_BATCH:
                raise RuntimeError(f"POST {PATH} answered {resp.status_code}: {resp.text[:300]}")

        bulk_fig = await repeat(counters, batch, bulk_jobs // BULK_BATCH, warm_up=0, time_box_s=600)
    bulk_fig["jobs_per_s"] = round(BULK_BATCH * 1000 / bulk_fig["mean_ms"], 1)
    bulk_fig["batch"] = BULK_BATCH
    bulk_fig.update(per_job=rows_figure(bulk_fig["deltas"], bulk_fig["n"] * BULK_BATCH))
    return {"single": single_fig, "bulk": bulk_fig, "first_id": first_id[0]}


async def drain(bench: Bench, counters: Counters, first_id: str) -> dict[str, Any]:
    """Every job submitted since `first_id` drained by DRAIN_WORKERS real worker processes; progress read
    off Redis (jobs still holding a message), so the bench's own polls read no MySQL row; then checked in
    MySQL. Rate from the first completion seen to the last; rows read from the workers' spawn to the end."""
    from sqlalchemy import text

    async with bench.db.connect() as conn:
        sql = "SELECT COUNT(*) FROM report_jobs WHERE id >= :f"
        jobs = int((await conn.execute(text(sql), {"f": first_id})).scalar() or 0)
    held0 = await messages_held(bench.rds)
    before = await counters.read()

    async def progress() -> int:
        return held0 - await messages_held(bench.rds)

    procs = [bench.spawn_worker(f"worker-scale-{i}") for i in range(DRAIN_WORKERS)]
    cpu = CpuMeter({**{p.name: p.pid for p in procs}, **bench.server_pids()}).start()
    try:
        fig = await watch(progress, jobs, procs, 0.1)
    finally:
        fig_cpu = cpu.stop()
        for proc in procs:
            proc.stop()
    delta = counters.delta(before, await counters.read())
    async with bench.db.connect() as conn:
        sql = "SELECT COUNT(*) FROM report_jobs WHERE id >= :f AND status = 'done'"
        done = int((await conn.execute(text(sql), {"f": first_id})).scalar() or 0)
    if done != jobs:
        raise RuntimeError(f"drain: Redis let go of {jobs} jobs but MySQL has {done} done")
    fig.update(rows_figure(delta, jobs), cpu_pct=fig_cpu, workers=DRAIN_WORKERS, done_in_mysql=done)
    return fig


async def purge(bench: Bench, counters: Counters, expired: int) -> dict[str, Any]:
    """`purge_expired_jobs()` called back to back until the `expired` jobs (filled just before, with their
    attempts) are gone: jobs deleted per second, per call (a tick makes one call), rows read per job."""
    from app.core.config import get_settings
    from app.maintenance.service import purge_expired_jobs

    before = await counters.read()
    began = time.perf_counter()
    total, calls, per_call, last_at = 0, 0, [], began
    while calls < MAX_PURGE_CALLS:
        got = await purge_expired_jobs()
        calls += 1
        if not got:
            break
        total += got
        per_call.append(got)
        last_at = time.perf_counter()
    delta = counters.delta(before, await counters.read())
    seconds = last_at - began
    interval = get_settings().scan_interval_s
    mean_call = statistics.fmean(per_call) if per_call else 0.0
    return {
        "expired": expired,
        "purged": total,
        "left": expired - total,
        "calls": calls,
        "seconds": round(seconds, 3),
        "jobs_per_s": round(total / seconds, 1) if seconds > 0 else None,
        "jobs_per_call": round(mean_call, 1),
        "ms_per_call": round(1000 * seconds / max(1, len(per_call)), 1),
        "scan_interval_s": interval,
        "ceiling_jobs_per_s_one_call_a_tick": round(mean_call / interval, 2),
        **rows_figure(delta, max(1, total)),
    }


async def recovery(bench: Bench, counters: Counters, backlog_ids: list[str]) -> dict[str, Any]:
    """FLUSHALL of the private Redis with the backlog pending, then `run_tick(use_lease=False)` until every
    backlog job's message is back in its lane (at most MAX_RECOVERY_TICKS). The time is the ticks' own (run
    back to back); at the scheduler's pace the wait is (ticks − 1) × SCAN_INTERVAL_S + the last tick."""
    from app.core.config import get_settings
    from app.maintenance.service import run_tick

    await bench.rds.flushall()
    before = await counters.read()
    tick_s: list[float] = []
    back: list[int] = []
    while len(tick_s) < MAX_RECOVERY_TICKS:
        began = time.perf_counter()
        await run_tick(use_lease=False)
        tick_s.append(time.perf_counter() - began)
        back.append(await in_lanes(bench.rds, backlog_ids))
        if back[-1] >= len(backlog_ids):
            break
    delta = counters.delta(before, await counters.read())
    interval = get_settings().scan_interval_s
    recovered = back[-1] >= len(backlog_ids)
    at_interval = (len(tick_s) - 1) * interval + tick_s[-1]
    return {
        "backlog": len(backlog_ids),
        "recovered": recovered,
        "ticks": len(tick_s),
        "tick_s": [round(s, 2) for s in tick_s],
        "in_lanes_after_each_tick": back,
        "seconds": round(sum(tick_s), 2),
        "seconds_at_scan_interval": round(at_interval, 2) if recovered else None,
        "scan_interval_s": interval,
        **rows_figure(delta, len(backlog_ids)),
    }


async def prime(bench: Bench, backlog_ids: list[str]) -> dict[str, Any]:
    """Ticks until the backlog (filled in SQL, never enqueued) is in its lanes: the state every size starts
    from."""
    from app.maintenance.service import run_tick

    began = time.perf_counter()
    for _ in range(MAX_RECOVERY_TICKS):
        await run_tick(use_lease=False)
        held = await in_lanes(bench.rds, backlog_ids)
        if held >= len(backlog_ids):
            break
    log(f"  backlog of {len(backlog_ids):,} in its lanes: {held:,} after {time.perf_counter() - began:.1f} s")
    return {"in_lanes": held, "seconds": round(time.perf_counter() - began, 2)}
