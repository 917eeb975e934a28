"""Pickup phase: one job at a time on an idle system, latency from just before the submission is sent to
the moment the job starts; ours (API + worker) against raw arq at arq's defaults (and at our poll delay when
that differs from arq's 0.5 s). Both ends read the same machine's wall clock (time.time() in the benchmark;
the worker's `started_at`, and raw arq's first line, on the same host)."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from datetime import datetime
from typing import Any

from bench.common import IDLE_SECONDS, JOB_BODY, PICKUP_SAMPLES, dephase, log, pct
from bench.context import Bench
from bench.loadgen import RawPoster
from bench.phases.idle import idle_cpu_pct
from bench.procs import CpuMeter

WARMUP_SAMPLES = 3  # the first few warm the worker up (imports, connections) and are not counted
ARQ_DEFAULT_POLL_DELAY_S = 0.5
JOB_WAIT_S = 20


async def pickup_ours(bench: Bench, poll_delay_s: float) -> dict[str, Any]:
    """Latency = the attempt's `started_at` − the moment just before the POST /v1/jobs was sent."""
    import httpx

    assert bench.api is not None, "start_api() first"
    await bench.clean()
    worker = bench.spawn_worker("worker-pickup")
    headers = {"Authorization": f"Bearer {bench.api_key}"}
    latencies: list[float] = []
    meter = CpuMeter({"worker": worker.pid, "api": bench.api.pid, **bench.server_pids()}).start()
    poster = RawPoster(bench.base_url, headers)
    try:
        await poster.connect()
        async with httpx.AsyncClient(base_url=bench.base_url, headers=headers, timeout=30) as client:
            for i in range(PICKUP_SAMPLES + WARMUP_SAMPLES):
                # The clock starts before the request: a worker woken by the enqueue can start the job
                # before the 202 gets back to us, so a clock started on the 202 could go negative. The
                # request's bytes are built first and written on an open connection, so the clock starts
                # as they go out (httpx's own ~1 ms of client work before that used to be counted).
                request = poster.request("/v1/jobs", JOB_BODY.encode())
                sent = time.time()
                status, body = await poster.post(request)
                if status != 202:
                    raise RuntimeError(f"submit answered {status}: {body[:300]!r}")
                job_id = json.loads(body)["id"]
                job = (await client.get(f"/v1/jobs/{job_id}", params={"wait": JOB_WAIT_S})).json()
                if job["status"] != "done":
                    raise RuntimeError(f"pickup job ended {job['status']}:\n{worker.tail()}")
                attempts = (await client.get(f"/v1/jobs/{job_id}/attempts")).json()
                started = datetime.fromisoformat(attempts[0]["started_at"].replace("Z", "+00:00"))
                if i >= WARMUP_SAMPLES:
                    latencies.append((started.timestamp() - sent) * 1000)
                await asyncio.sleep(dephase(poll_delay_s))
        cpu = meter.stop()
        idle = await idle_cpu_pct(worker.pid)
    finally:
        poster.close()
        worker.stop()
    return dict(summary(latencies, idle), cpu_pct=cpu)


async def pickup_raw_arq(bench: Bench, poll_delay_s: float, defaults: bool = False) -> dict[str, Any]:
    """Latency = the function's first line − the moment just before `enqueue_job` was called; our worker's
    settings at `poll_delay_s`, or (`defaults`) arq's own settings throughout."""
    from arq import create_pool
    from arq.connections import RedisSettings

    from bench.raw_arq import ARQ_DEFAULTS, RAW_FUNCTION, STARTED_PREFIX, pool_kwargs

    await bench.clean()
    if defaults:
        assert poll_delay_s == ARQ_DEFAULTS["poll_delay"]
        env = {"BENCH_RAW_DEFAULTS": "1"}
    else:
        env = {"BENCH_RAW_POLL_DELAY": str(poll_delay_s)}
    name = "raw-arq-pickup-" + ("defaults" if defaults else f"{poll_delay_s:g}")
    worker = bench.spawn_raw_arq(name, BENCH_RAW_RECORD="1", **env)
    pool = await create_pool(RedisSettings.from_dsn(bench.redis.url), **pool_kwargs(defaults))
    latencies: list[float] = []
    meter = CpuMeter({"worker": worker.pid, **bench.server_pids()}).start()
    try:
        for i in range(PICKUP_SAMPLES + WARMUP_SAMPLES):
            job_id = f"pickup-{i}"
            sent = time.time()
            await pool.enqueue_job(RAW_FUNCTION, _job_id=job_id)
            got = await bench.rds.blpop([f"{STARTED_PREFIX}{job_id}"], timeout=JOB_WAIT_S)
            if got is None:
                raise RuntimeError(f"raw arq never started {job_id}:\n{worker.tail()}")
            if i >= WARMUP_SAMPLES:
                latencies.append((float(got[1]) - sent) * 1000)
            await asyncio.sleep(dephase(poll_delay_s))
        cpu = meter.stop()
        idle = await idle_cpu_pct(worker.pid)
    finally:
        await pool.aclose()
        worker.stop()
    result = dict(summary(latencies, idle), cpu_pct=cpu)
    result["poll_delay_s"] = poll_delay_s
    result["arq_defaults"] = defaults
    return result


def summary(latencies_ms: list[float], idle_cpu_pct: float) -> dict[str, Any]:
    return {
        "samples": len(latencies_ms),
        "p50_ms": pct(latencies_ms, 50),
        "p90_ms": pct(latencies_ms, 90),
        "p99_ms": pct(latencies_ms, 99),
        "mean_ms": statistics.fmean(latencies_ms),
        "max_ms": max(latencies_ms),
        "idle_cpu_pct_of_core": round(idle_cpu_pct, 2),
        "latencies_ms": [round(v, 2) for v in latencies_ms],
    }


async def run(bench: Bench) -> None:
    from app.core.config import get_settings

    ours_poll_s = get_settings().worker_poll_delay_s
    log(f"pickup: {PICKUP_SAMPLES} single submissions on an idle system, idle CPU over {IDLE_SECONDS:g} s")
    pickup: dict[str, Any] = {"ours": await pickup_ours(bench, ours_poll_s)}
    pickup["ours"]["poll_delay_s"] = ours_poll_s
    pickup["raw_arq_default_poll"] = await pickup_raw_arq(bench, ARQ_DEFAULT_POLL_DELAY_S, defaults=True)
    if ours_poll_s == ARQ_DEFAULT_POLL_DELAY_S:
        # Our poll delay is arq's: the run at arq's defaults is also the one at our poll delay (pickup and
        # idle CPU depend on the poll delay, not on the result keeping or serializer that differ).
        pickup["raw_arq_same_poll"] = dict(pickup["raw_arq_default_poll"], same_run_as="raw_arq_default_poll")
    else:
        pickup["raw_arq_same_poll"] = await pickup_raw_arq(bench, ours_poll_s)
    for name, fig in pickup.items():
        log(f"  {name}: p50 {fig['p50_ms']:.1f} ms p99 {fig['p99_ms']:.1f} ms, "
            f"idle CPU {fig['idle_cpu_pct_of_core']:.2f} %")  # fmt: skip
    bench.results["pickup"] = pickup
