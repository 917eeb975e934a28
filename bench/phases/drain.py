"""Drain phase: N no-op jobs queued with the workers stopped, then drained to `done` by 2 worker processes of
ours, of raw arq under our settings, of raw arq under arq's defaults, Celery prefork 2 (state in MySQL) and
Dramatiq 2 processes (a MySQL status row per job); rate from the first completion seen to the last, CPU per
job over that same window."""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from bench.common import CELERY_DB, DRAIN_JOBS, DRAIN_TIMEOUT_S, STALL_S, log, run_cmd
from bench.context import Bench
from bench.procs import CpuMeter, Proc

ENQUEUE_BATCH = 500
CELERY_PUBLISH_TIMEOUT_S = 300.0


DRAIN_WORKERS = 2  # issue 15's drain targets are for 2 worker processes (Celery: prefork 2)
DRAMATIQ_THREADS = 8  # Dramatiq's default threads per worker process


class WindowMeter:
    """A CpuMeter started at the first completion seen (so the processes' start-up, imports and connections,
    is not charged to the jobs) and stopped at the last: the same window as the rate."""

    def __init__(self, groups: dict[str, int]) -> None:
        self.groups = groups
        self.meter: CpuMeter | None = None

    def start(self) -> None:
        self.meter = CpuMeter(self.groups).start()

    def stop(self) -> dict[str, float]:
        assert self.meter is not None, "no completion was seen"
        return self.meter.stop()


async def watch(
    progress: Callable[[], Awaitable[int]],
    total: int,
    procs: Sequence[Proc],
    interval_s: float,
    on_first: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Poll `progress` until it reaches `total`; the rate runs from the first completion to the last;
    `on_first` is called when the first completion is seen."""
    spawned = time.perf_counter()
    first_at: float | None = None
    first_count = 0
    deadline = spawned + DRAIN_TIMEOUT_S
    last_count, last_change = -1, spawned
    polls = 0
    while True:
        count = await progress()
        polls += 1
        now = time.perf_counter()
        if first_at is None and count > 0:
            first_at, first_count = now, count
            if on_first is not None:
                on_first()
        if count >= total:
            break
        if count != last_count:
            last_count, last_change = count, now
        for proc in procs:
            if not proc.alive():
                raise RuntimeError(f"{proc.name} exited during the drain:\n{proc.tail()}")
        if now > deadline or now - last_change > STALL_S:
            tails = "\n".join(f"--- {p.name}\n{p.tail(10)}" for p in procs)
            raise RuntimeError(f"drain stuck or too slow at {count}/{total}:\n{tails}")
        await asyncio.sleep(interval_s)
    assert first_at is not None
    window = now - first_at
    return {
        "jobs": total,
        "seconds_first_to_last": round(window, 3),
        "jobs_per_s": (total - first_count) / window if window > 0 else math.nan,
        "seconds_from_spawn": round(now - spawned, 3),
        "jobs_per_s_from_spawn": total / (now - spawned),
        "progress_polls": polls,
    }


async def drain_ours(
    bench: Bench, workers: int, jobs: int = DRAIN_JOBS, label: str = "drain", **extra_env: str
) -> dict[str, Any]:
    """`jobs` queued, then drained by `workers` of our workers (their settings overridden by `extra_env`)."""
    await bench.clean()
    submit_rate = await bench.submit_many(jobs)
    queued = int(await bench.rds.zcard("arq:queue"))
    status = await bench.mysql_status()
    procs = [bench.spawn_worker(f"worker-{label}{workers}-{i}", **extra_env) for i in range(workers)]
    groups = {**{p.name: p.pid for p in procs}, **bench.server_pids()}
    meter, window = CpuMeter(groups).start(), WindowMeter(groups)
    try:
        result = await watch(bench.done_count, jobs, procs, 0.1, window.start)
        result["cpu_pct"] = window.stop()
        result["cpu_pct_from_spawn"] = meter.stop()
        result["mysql_per_job"] = await bench.per_job_statements(status, jobs, result["progress_polls"])
    finally:
        for proc in procs:
            proc.stop()
    first, last = await finish_window(bench)
    if first and last and last > first:
        result["jobs_per_s_mysql_timestamps"] = (jobs - 1) / (last - first).total_seconds()
    result.update(submit_in_process_jobs_per_s=round(submit_rate, 1), queued_in_redis=queued)
    return result


async def finish_window(bench: Bench) -> tuple[datetime | None, datetime | None]:
    """The first and last `finished_at` in MySQL: the drain's rate by the jobs' own timestamps."""
    from sqlalchemy import text

    async with bench.db.connect() as conn:
        row = (await conn.execute(text("SELECT MIN(finished_at), MAX(finished_at) FROM report_jobs"))).one()
    return row[0], row[1]


async def drain_raw_arq(bench: Bench, workers: int, defaults: bool = False) -> dict[str, Any]:
    """Raw arq under our worker's settings, or (`defaults`) under arq's own; progress = the queue emptying
    (arq removes a job from its queue when the job ends)."""
    from arq import create_pool
    from arq.connections import RedisSettings

    from bench.raw_arq import RAW_FUNCTION, RAW_QUEUE, pool_kwargs, settings_in_effect

    await bench.clean()
    pool = await create_pool(RedisSettings.from_dsn(bench.redis.url), **pool_kwargs(defaults))
    try:
        began = time.perf_counter()
        for start in range(0, DRAIN_JOBS, ENQUEUE_BATCH):
            batch = range(start, min(start + ENQUEUE_BATCH, DRAIN_JOBS))
            await asyncio.gather(*(pool.enqueue_job(RAW_FUNCTION) for _ in batch))
        enqueue_rate = DRAIN_JOBS / (time.perf_counter() - began)
    finally:
        await pool.aclose()

    async def progress() -> int:
        return DRAIN_JOBS - int(await bench.rds.zcard(RAW_QUEUE))

    kind = "defaults" if defaults else "same"
    env = {"BENCH_RAW_DEFAULTS": "1"} if defaults else {}
    procs = [bench.spawn_raw_arq(f"raw-arq-{kind}-drain{workers}-{i}", **env) for i in range(workers)]
    groups = {**{p.name: p.pid for p in procs}, **bench.server_pids()}
    meter, window = CpuMeter(groups).start(), WindowMeter(groups)
    try:
        result = await watch(progress, DRAIN_JOBS, procs, 0.05, window.start)
        result["cpu_pct"] = window.stop()
        result["cpu_pct_from_spawn"] = meter.stop()
    finally:
        for proc in procs:
            proc.stop()
    result["enqueue_jobs_per_s"] = round(enqueue_rate, 1)
    result["settings"] = settings_in_effect(defaults)
    result["workers"] = workers
    return result


async def drain_celery(bench: Bench) -> dict[str, Any]:
    await bench.clean()
    out = await asyncio.to_thread(
        run_cmd,
        [sys.executable, "-m", "bench.celery_app", str(DRAIN_JOBS)],
        bench.env,
        CELERY_PUBLISH_TIMEOUT_S,
    )
    publish_rate = float(out.strip().splitlines()[-1])
    status = await bench.mysql_status()

    async def progress() -> int:
        sql = f"SELECT COUNT(*) FROM `{CELERY_DB}`.celery_taskmeta WHERE status = 'SUCCESS'"
        return int(await bench.scalar(sql) or 0)

    proc = bench.spawn(
        "celery",
        [sys.executable, "-m", "celery", "-A", "bench.celery_app", "worker", "--pool=prefork",
         "--concurrency=2", "--loglevel=WARNING", "-n", "bench@%h"],
    )  # fmt: skip
    groups = {"celery (all processes)": proc.pid, **bench.server_pids()}
    meter, window = CpuMeter(groups).start(), WindowMeter(groups)
    try:
        result = await watch(progress, DRAIN_JOBS, [proc], 0.1, window.start)
        result["cpu_pct"] = window.stop()
        result["cpu_pct_from_spawn"] = meter.stop()
        result["mysql_per_job"] = await bench.per_job_statements(status, DRAIN_JOBS, result["progress_polls"])
    finally:
        proc.stop()
    result["publish_tasks_per_s"] = round(publish_rate, 1)
    return result


async def drain_dramatiq(bench: Bench) -> dict[str, Any]:
    """Dramatiq with its Redis broker: DRAIN_JOBS messages sent, then 2 worker processes (8 threads each,
    Dramatiq's default) whose actor INSERTs one status row per job in MySQL (bench/dramatiq_app.py)."""
    from bench.dramatiq_app import STATUS_TABLE

    await bench.clean()
    out = await asyncio.to_thread(
        run_cmd,
        [sys.executable, "-m", "bench.dramatiq_app", str(DRAIN_JOBS)],
        bench.env,
        CELERY_PUBLISH_TIMEOUT_S,
    )
    publish_rate = float(out.strip().splitlines()[-1])
    status = await bench.mysql_status()

    async def progress() -> int:
        return int(await bench.scalar(f"SELECT COUNT(*) FROM `{CELERY_DB}`.{STATUS_TABLE}") or 0)

    argv = [
        sys.executable, "-m", "dramatiq", "bench.dramatiq_app", "--processes", str(DRAIN_WORKERS),
        "--threads", str(DRAMATIQ_THREADS), "--skip-logging",
    ]  # fmt: skip
    proc = bench.spawn("dramatiq", argv)
    groups = {"dramatiq (all processes)": proc.pid, **bench.server_pids()}
    meter, window = CpuMeter(groups).start(), WindowMeter(groups)
    try:
        result = await watch(progress, DRAIN_JOBS, [proc], 0.1, window.start)
        result["cpu_pct"] = window.stop()
        result["cpu_pct_from_spawn"] = meter.stop()
        result["mysql_per_job"] = await bench.per_job_statements(status, DRAIN_JOBS, result["progress_polls"])
    finally:
        proc.stop()
    result.update(
        publish_messages_per_s=round(publish_rate, 1),
        processes=DRAIN_WORKERS,
        threads_per_process=DRAMATIQ_THREADS,
        command=" ".join(argv[1:]),
    )
    return result


async def run(bench: Bench) -> None:
    w = DRAIN_WORKERS
    log(f"drain: {DRAIN_JOBS} queued no-op jobs, {w} worker processes each: ours, raw arq under our "
        "settings, raw arq under arq's defaults; Celery prefork 2; Dramatiq")  # fmt: skip
    drain: dict[str, Any] = {}
    drain[f"ours_{w}w"] = await drain_ours(bench, w)
    log(f"  ours, {w} workers: {drain[f'ours_{w}w']['jobs_per_s']:.0f} jobs/s")
    drain[f"raw_arq_{w}w"] = await drain_raw_arq(bench, w)
    log(f"  raw arq, our settings, {w} workers: {drain[f'raw_arq_{w}w']['jobs_per_s']:.0f} jobs/s")
    drain[f"raw_arq_defaults_{w}w"] = await drain_raw_arq(bench, w, defaults=True)
    log(f"  raw arq, arq's defaults, {w} workers: {drain[f'raw_arq_defaults_{w}w']['jobs_per_s']:.0f} jobs/s")
    drain["celery_prefork2"] = await drain_celery(bench)
    log(f"  Celery prefork 2 + MySQL results: {drain['celery_prefork2']['jobs_per_s']:.0f} jobs/s")
    drain["dramatiq_2p"] = await drain_dramatiq(bench)
    ours, dram = drain[f"ours_{w}w"]["jobs_per_s"], drain["dramatiq_2p"]["jobs_per_s"]
    drain["ours_vs_dramatiq"] = round(ours / dram, 3) if dram else None
    log(f"  Dramatiq 2 processes x {DRAMATIQ_THREADS} threads + MySQL status row: {dram:.0f} jobs/s; "
        f"ours / Dramatiq = {ours / dram:.2f}x")  # fmt: skip
    bench.results["drain"] = drain
