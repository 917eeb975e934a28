"""Memory phase: one worker's RSS over many no-op jobs submitted while it runs; growth is counted from
after a warm-up, and the phase is time-boxed (and says so) to keep the whole run within its budget.

It needs MEMORY_JOBS ÷ (one worker's rate) seconds; when a full run leaves it less, the row says so and the
figures say why (the rate, the time allowed, the time the full count would have needed):
`BENCH_PHASES=memory` alone has the whole budget for it."""

from __future__ import annotations

import asyncio
import contextlib
import time

from bench.common import MEMORY_JOBS, RUN_BUDGET_S, RUN_STARTED, STALL_S, log
from bench.context import Bench
from bench.procs import cpu_seconds, rss_bytes

IDLE_START_S = 2.0  # let the worker finish importing and connecting before its "cold" RSS is read
MIN_PHASE_S = 30.0  # even a run over its budget gets this long here, so the figure means something
SAMPLE_INTERVAL_S = 0.25
MB = 2**20


async def run(bench: Bench) -> None:
    time_left_s = RUN_BUDGET_S - (time.monotonic() - RUN_STARTED) - 10
    log(f"memory: one worker's RSS over {MEMORY_JOBS} no-op jobs (submitted while it runs); "
        f"{max(MIN_PHASE_S, time_left_s):.0f} s of the run's budget left for it")  # fmt: skip
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
        warm_done, warm_at, warm_cpu = 0, 0.0, 0.0
        allowed_s = max(MIN_PHASE_S, RUN_BUDGET_S - (time.monotonic() - RUN_STARTED) - 10)
        deadline = time.perf_counter() + allowed_s
        last_done, last_change, time_boxed = -1, time.perf_counter(), False
        while True:
            done = await bench.done_count()
            rss = rss_bytes(worker.pid)
            now = time.perf_counter()
            if warm is None and done >= warm_after:
                warm, warm_done, warm_at, warm_cpu = rss, done, now, cpu_seconds(worker.pid)
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
        end_done, end_at, end_cpu = samples[-1][0], time.perf_counter(), cpu_seconds(worker.pid)
        submitter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await submitter
        elapsed = time.perf_counter() - began
        await asyncio.sleep(1.0)
        end = rss_bytes(worker.pid)
    finally:
        worker.stop()
    assert warm is not None
    after_warm = max(1, end_done - warm_done)
    rate = after_warm / (end_at - warm_at) if end_at > warm_at else float("nan")
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
        "seconds_allowed": round(allowed_s, 1),
        "budget_s": RUN_BUDGET_S,
        # One worker's pace after the warm-up, and what the full count would have taken at it.
        "jobs_per_s_after_warm_up": round(rate, 1),
        "seconds_needed_estimate": round(MEMORY_JOBS / rate, 1) if rate > 0 else None,
        "worker_cpu_ms_per_job_after_warm_up": round(1000.0 * (end_cpu - warm_cpu) / after_warm, 3),
    }
    log(f"  {mem['jobs']} jobs in {mem['seconds']} s: RSS cold {mem['rss_cold_mb']} MB, warm "
        f"{mem['rss_warm_mb']} MB, end {mem['rss_end_mb']} MB "
        f"(+{mem['growth_pct_from_warm']} % from warm)"
        + (" — time-boxed" if mem["time_boxed"] else ""))  # fmt: skip
