"""`make bench`: private MariaDB + Redis; submit (single and bulk), drain, pickup and memory figures vs the
trivial POST, raw arq, Celery and Dramatiq, all in one run, against issue 15's targets.

BENCH_PHASES=scale (issue 28) fills report_jobs to 1M and 10M finished jobs in bulk SQL and repeats the
figures at each size with the rows MariaDB read for them (BENCH_SCALE_SIZES picks the sizes).

Writes bench/results/<date>.json and .md (BENCH_RESULTS_DIR elsewhere) and prints the table; BENCH_SCALE=0.1
shrinks every count; bench/common.py lists the knobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime
from pathlib import Path

from bench.common import (
    ALL_PHASES,
    API_WORKERS,
    BULK_BATCH,
    BULK_CLIENTS,
    BULK_SECONDS,
    CONCURRENCY,
    DRAIN_JOBS,
    FAIRNESS_A_JOBS,
    FAIRNESS_B_JOBS,
    IDLE_SECONDS,
    MEMORY_JOBS,
    PICKUP_SAMPLES,
    ROOT,
    SCALE,
    SUBMIT_SECONDS,
    log,
    scale_sizes,
    wanted_phases,
)
from bench.context import Bench
from bench.phases import bulk, drain, fairness, memory, metrics, pickup, scale, sql_reports, submit
from bench.procs import stop_all
from bench.report import machine_info, markdown, write_results

BENCH_DEPS = ("celery", "dramatiq", "pymysql")
INSTALL_TIMEOUT_S = 600
APT_TIMEOUT_S = 180


def ensure_bench_group() -> None:
    """`make install` syncs without the bench group: add it (celery, pymysql) and re-exec once."""
    if all(importlib.util.find_spec(name) for name in BENCH_DEPS):
        return
    if os.environ.get("BENCH_GROUP_SYNCED"):
        sys.exit(f"bench: {', '.join(BENCH_DEPS)} still missing after `uv sync --group bench`")
    uv = shutil.which("uv")
    cmd = [uv] if uv else ["python3", "-m", "uv"]
    cmd += ["sync", "--frozen", "--inexact", "--group", "bench"]
    print(f"bench: installing the bench dependency group: {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True, timeout=INSTALL_TIMEOUT_S)
    env = dict(os.environ, BENCH_GROUP_SYNCED="1")
    os.execve(sys.executable, [sys.executable, "-m", "bench.run", *sys.argv[1:]], env)


def ensure_wrk() -> str | None:
    """wrk if installed; as root, try Debian's package once; None → bench/loadgen.py."""
    if os.environ.get("BENCH_NO_WRK"):
        return None
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for attempt in ("install", "update+install"):
        if attempt == "update+install":
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                subprocess.run(
                    ["apt-get", "update"], env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=False
                )
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(
                ["apt-get", "install", "-y", "--no-install-recommends", "wrk"],
                env=env,
                capture_output=True,
                timeout=APT_TIMEOUT_S,
                check=False,
            )
        if shutil.which("wrk"):
            return shutil.which("wrk")
    return None


async def run_phases(bench: Bench) -> None:
    """The phases BENCH_PHASES asks for, in their fixed order; the API runs from submit through pickup.
    How long each took goes into the results (`phase_seconds`): the run's budget is shared between them."""
    wanted = wanted_phases()
    seconds: dict[str, float] = bench.results.setdefault("phase_seconds", {})

    async def timed(name: str, phase: Callable[[Bench], Awaitable[None]]) -> None:
        if name in wanted:
            began = time.perf_counter()
            await phase(bench)
            seconds[name] = round(time.perf_counter() - began, 1)

    await bench.connect()
    try:
        if "submit" in wanted:
            await timed("submit", submit.run)  # starts the API
        elif "bulk" in wanted or "pickup" in wanted:
            await bench.start_api()
        await timed("bulk", bulk.run)
        await timed("drain", drain.run)
        await timed("pickup", pickup.run)
        bench.stop_api()  # the fairness and memory workers run without it
        await timed("fairness", fairness.run)  # its own workers; before memory, which takes what is left
        await timed("memory", memory.run)
        await timed("metrics", metrics.run)  # its own API processes (metrics on and off) and workers
        await timed("scale", scale.run)  # it fills the tables to millions of rows (its own API)
        await timed("sql_reports", sql_reports.run)  # its own data source and worker
    finally:
        await bench.close()


def _raise_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    wanted_phases()  # a misspelt BENCH_PHASES stops here, before anything is installed or started
    ensure_bench_group()
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored (`&`)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGHUP, _raise_interrupt)
    started = time.perf_counter()
    wrk = ensure_wrk()
    work = Path(tempfile.mkdtemp(prefix="report-orchestrator-bench-"))
    bench = Bench(work, wrk)
    ok = False
    try:
        bench.start_servers()
        try:
            import uvloop

            uvloop.run(run_phases(bench))
        except ImportError:
            asyncio.run(run_phases(bench))
        ok = True
    except KeyboardInterrupt:
        log("interrupted: stopping everything this run started")
        partial = work / "logs" / "partial-results.json"
        partial.write_text(json.dumps(bench.results, indent=2, default=str))
        log(f"partial figures in {partial}")
    except Exception:
        partial = work / "logs" / "partial-results.json"
        partial.write_text(json.dumps(bench.results, indent=2, default=str))
        log(f"failed; partial figures in {partial}")
        raise
    finally:
        stop_all()
        bench.mariadb.cleanup()
        bench.redis.cleanup()
        if ok:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"logs of the children kept in {work / 'logs'}")
    if not ok:
        sys.exit(130)
    res = bench.results
    res.update(
        date=date.today().isoformat(),
        finished_at=datetime.now(UTC).isoformat(),
        scale=SCALE,
        phases=[p for p in ALL_PHASES if p in wanted_phases()],
        total_seconds=round(time.perf_counter() - started, 1),
        load_generator="wrk" if wrk else "bench/loadgen.py (asyncio)",
        machine=machine_info(bench),
        parameters={
            "concurrency": CONCURRENCY, "submit_seconds": SUBMIT_SECONDS, "api_workers": API_WORKERS,
            "bulk_batch": BULK_BATCH, "bulk_clients": BULK_CLIENTS, "bulk_seconds": BULK_SECONDS,
            "drain_jobs": DRAIN_JOBS, "fairness_a_jobs": FAIRNESS_A_JOBS, "fairness_b_jobs": FAIRNESS_B_JOBS,
            "pickup_samples": PICKUP_SAMPLES, "idle_seconds": IDLE_SECONDS, "memory_jobs": MEMORY_JOBS,
            "scale_sizes": scale_sizes() if "scale" in wanted_phases() else None,
        },
    )  # fmt: skip
    stem = write_results(res)
    print()
    print(markdown(res))
    log(f"wrote {stem}.json and .md in {res['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()
