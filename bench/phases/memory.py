"""Memory phase: one worker's RSS over many no-op jobs submitted while it runs; growth is counted from
after a warm-up, and the phase is time-boxed (and says so) to keep the whole run within its budget."""

from __future__ import annotations

import asyncio
import contextlib
import time

from bench.common import MEMORY_JOBS, RUN_BUDGET_S, RUN_STARTED, STALL_S, log
from bench.context import Bench
from bench.procs import rss_bytes

IDLE_START_S = 2.0  # let the worker finish importing and connecting before its "cold" RSS is read
MIN_PHASE_S = 30.0  # even a run over its budget gets this long here, so the figure means something
SAMPLE_INTERVAL_S = 0.25
MB = 2**20


async def run(bench: Bench) -> None:
    log(f"memory: one worker's RSS over {MEMORY_JOBS} no-op jobs (submitted while it runs)")
    await bench.clean()
    worker = bench.spawn_worker("worker-memory")
    warm_after = max(100, MEMORY_JOBS // 50)
    samples: list[tuple[int, int]] = []
    try:
        await asyncio.sleep(IDLE_START_S)
        cold = rss_bytes(worker.pid)
        began = time.perf_counter()
        submitter = asyncio.create_task(bench.submit_many(MEMORY_JOBS, concurrency=8))
        warm: int | None = None
        time_left_s = RUN_BUDGET_S - (time.monotonic() - RUN_STARTED) - 10
        deadline = time.perf_counter() + max(MIN_PHASE_S, time_left_s)
        last_done, last_change, time_boxed = -1, time.perf_counter(), False
        while True:
            done = await bench.done_count()
            rss = rss_bytes(worker.pid)
            now = time.perf_counter()
            if warm is None and done >= warm_after:
                warm = rss
            if not samples or done - samples[-1][0] >= MEMORY_JOBS // 20 or done >= MEMORY_JOBS:
                samples.append((done, rss))
            if done >= MEMORY_JOBS:
                break
            if done != last_done:
                last_done, last_change = done, now
            if not worker.alive():
                raise RuntimeError(f"memory worker exited:\n{worker.tail()}")
            if now - last_change > STALL_S:
                raise RuntimeError(f"memory run stuck at {done}/{MEMORY_JOBS}:\n{worker.tail(10)}")
            if now > deadline and warm is not None:
                time_boxed = True  # keep the whole run under its budget; the figure says so
                samples.append((done, rss))
                break
            await asyncio.sleep(SAMPLE_INTERVAL_S)
        submitter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await submitter
        elapsed = time.perf_counter() - began
        await asyncio.sleep(1.0)
        end = rss_bytes(worker.pid)
    finally:
        worker.stop()
    assert warm is not None
    bench.results["memory"] = mem = {
        "jobs": samples[-1][0],
        "jobs_wanted": MEMORY_JOBS,
        "time_boxed": time_boxed,
        "warm_up_jobs": warm_after,
        "rss_cold_mb": round(cold / MB, 2),
        "rss_warm_mb": round(warm / MB, 2),
        "rss_end_mb": round(end / MB, 2),
        "growth_pct_from_warm": round(100.0 * (end - warm) / warm, 2),
        "growth_pct_from_cold": round(100.0 * (end - cold) / cold, 2),
        "samples_done_rss_mb": [(d, round(r / MB, 2)) for d, r in samples],
        "seconds": round(elapsed, 1),
    }
    log(f"  {mem['jobs']} jobs in {mem['seconds']} s: RSS cold {mem['rss_cold_mb']} MB, warm "
        f"{mem['rss_warm_mb']} MB, end {mem['rss_end_mb']} MB "
        f"(+{mem['growth_pct_from_warm']} % from warm)"
        + (" — time-boxed" if mem["time_boxed"] else ""))  # fmt: skip
