"""`make bench`: private MariaDB + Redis; submit, drain, pickup and memory figures vs raw arq and Celery.

Writes bench/results/<date>.json and .md and prints the table; BENCH_SCALE=0.1 shrinks every count.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import math
import os
import platform
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "bench" / "results"
BENCH_DEPS = ("celery", "pymysql")

# ---- scale and fixed parameters ------------------------------------------------------------------
# Knobs (environment): BENCH_SCALE (1; 0.1 for a quick try; results named <date>-scale0.1.*),
# BENCH_PHASES (submit,drain,pickup,memory), BENCH_MYSQL_FLUSH (1, MariaDB's default; 2 = no fsync
# per commit), BENCH_NO_WRK=1 (use bench/loadgen.py), BENCH_BUDGET_S (560: the memory phase is cut
# short, and says so, to keep the whole run under 10 minutes).

SCALE = float(os.environ.get("BENCH_SCALE", "1"))
CONCURRENCY = 64
SUBMIT_SECONDS = max(2.0, 10.0 * min(SCALE, 1.0))
WARMUP_SECONDS = 2.0 if SCALE >= 1 else 1.0
DRAIN_JOBS = max(100, round(10_000 * SCALE))
PICKUP_SAMPLES = max(10, round(50 * SCALE))
IDLE_SECONDS = max(2.0, 5.0 * min(SCALE, 1.0))
MEMORY_JOBS = max(500, round(50_000 * SCALE))
DRAIN_TIMEOUT_S = 240.0
STALL_S = 30.0  # no progress for this long: the run is broken, stop it rather than wait out the timeout
# The whole run must stay under 10 minutes: the memory phase, last, is cut short (and says so) to fit.
RUN_BUDGET_S = float(os.environ.get("BENCH_BUDGET_S", "560"))
RUN_STARTED = time.monotonic()
MYSQL_COUNTERS = (
    "Questions", "Com_select", "Com_insert", "Com_update", "Com_delete", "Com_commit", "Com_rollback",
    "Innodb_data_fsyncs", "Innodb_os_log_written",
)  # fmt: skip
TENANT = "bench"
CELERY_DB = "celery_results"
JOB_BODY = '{"report_type":"bench.noop","params":{}}'
# MariaDB's own default is 1 (fsync the redo log at every commit); the test harness relaxes it to 2.
MYSQL_FLUSH_AT_COMMIT = os.environ.get("BENCH_MYSQL_FLUSH", "1")


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
    subprocess.run(cmd, cwd=ROOT, check=True, timeout=600)
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
                subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=180, check=False)
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(
                ["apt-get", "install", "-y", "--no-install-recommends", "wrk"],
                env=env,
                capture_output=True,
                timeout=180,
                check=False,
            )
        if shutil.which("wrk"):
            return shutil.which("wrk")
    return None


# ---- small helpers -------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def dephase(poll_delay: float) -> float:
    """A pause between two pickup samples that lands at a uniformly random point of the poll cycle."""
    return 0.05 + random.uniform(0, max(poll_delay, 0.05))


def run_cmd(argv: Sequence[str], env: dict[str, str] | None = None, timeout: float = 120) -> str:
    done = subprocess.run(
        list(argv), cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])}… failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def version_of(argv: Sequence[str]) -> str:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class CpuMeter:
    """CPU used between start() and stop() by named process groups, by us, and by the whole machine.

    Figures are % of one core; `others` is what the machine spent on processes this run did not start
    (e.g. another test-suite on the same host), which makes a figure noisy.
    """

    groups: dict[str, int]
    began: float = 0.0
    before: dict[int, tuple[int, float]] = field(default_factory=dict)
    machine_before: tuple[float, float] = (0.0, 0.0)
    own_before: float = 0.0
    children_before: float = 0.0

    def start(self) -> CpuMeter:
        from bench.procs import group_cpu_seconds, machine_busy_seconds, own_cpu_seconds

        self.before = group_cpu_seconds(set(self.groups.values()))
        self.machine_before = machine_busy_seconds()
        self.own_before = own_cpu_seconds()
        self.children_before = children_cpu_s()
        self.began = time.monotonic()
        return self

    def stop(self) -> dict[str, float]:
        from bench.procs import group_cpu_seconds, machine_busy_seconds, own_cpu_seconds

        elapsed = time.monotonic() - self.began
        after = group_cpu_seconds(set(self.groups.values()))
        machine = machine_busy_seconds()
        per_group = dict.fromkeys(self.groups.values(), 0.0)
        for pid, (pgrp, seconds) in after.items():
            per_group[pgrp] += seconds - self.before.get(pid, (pgrp, 0.0))[1]
        out = {name: round(100.0 * per_group[pgid] / elapsed, 1) for name, pgid in self.groups.items()}
        out["bench_runner"] = round(100.0 * (own_cpu_seconds() - self.own_before) / elapsed, 1)
        out["load_generator"] = round(100.0 * (children_cpu_s() - self.children_before) / elapsed, 1)
        out["machine"] = round(100.0 * (machine[0] - self.machine_before[0]) / elapsed, 1)
        out["others"] = round(out["machine"] - sum(v for k, v in out.items() if k != "machine"), 1)
        return out


# ---- the run -------------------------------------------------------------------------------------


class Bench:
    def __init__(self, work: Path, wrk: str | None) -> None:
        from bench.servers import BenchMariaDB
        from tests.servers import RedisServer

        self.work = work
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.wrk = wrk
        self.mariadb = BenchMariaDB(flush_at_commit=MYSQL_FLUSH_AT_COMMIT)
        self.redis = RedisServer()
        self.results: dict[str, Any] = {}
        self.env: dict[str, str] = {}
        self.api_key = ""
        self.api_port = 0
        self.api: Any = None
        self.db: Any = None
        self.rds: Any = None

    # -- set-up -------------------------------------------------------------------------------------------

    def start_servers(self) -> None:
        log("starting private MariaDB and Redis (free ports, never 3306/6379)")
        self.mariadb.start()
        self.redis.start()
        self.mariadb.sql(f"CREATE DATABASE IF NOT EXISTS `{CELERY_DB}`")
        url = self.mariadb.url
        base = {k: v for k, v in os.environ.items() if not k.startswith(("BENCH_", "DATABASE_", "REDIS_"))}
        self.env = dict(
            base,
            ENV="bench",
            DATABASE_URL=url,
            REDIS_URL=self.redis.url,
            REPORT_MODULES="bench.noop_report",
            ENABLE_DEMO_REPORTS="false",
            OUTPUT_DIR=str(self.work / "outputs"),
            PYTHONPATH=str(ROOT),
            PYTHONUNBUFFERED="1",
            BENCH_CELERY_BROKER=self.redis.url.rsplit("/", 1)[0] + "/1",
            BENCH_CELERY_BACKEND=f"db+mysql+pymysql://root@127.0.0.1:{self.mariadb.port}/{CELERY_DB}",
        )
        for key in (
            "DATABASE_URL",
            "REDIS_URL",
            "REPORT_MODULES",
            "ENABLE_DEMO_REPORTS",
            "OUTPUT_DIR",
            "ENV",
        ):
            os.environ[key] = self.env[key]
        log("alembic upgrade head")
        run_cmd([sys.executable, "-m", "alembic", "upgrade", "head"], env=self.env)
        out = run_cmd(
            [sys.executable, "-m", "app.cli", "keys", "create", "--tenant", TENANT, "--scopes",
             "jobs:read,jobs:write", "--name", "bench"],
            env=self.env,
        )  # fmt: skip
        self.api_key = out.strip().splitlines()[-1].strip()

    async def connect(self) -> None:
        import redis.asyncio as aioredis
        from sqlalchemy.ext.asyncio import create_async_engine

        from app.reports.registry import registry

        self.db = create_async_engine(self.mariadb.url, pool_size=2, max_overflow=2)
        self.rds = aioredis.Redis.from_url(self.redis.url)
        registry.load(False, ["bench.noop_report"])

    async def close(self) -> None:
        from app import queue
        from app.db import dispose_engine

        with contextlib.suppress(Exception):
            await queue.close_pool()
        with contextlib.suppress(Exception):
            await dispose_engine()
        if self.rds is not None:
            with contextlib.suppress(Exception):
                await self.rds.aclose()
        if self.db is not None:
            with contextlib.suppress(Exception):
                await self.db.dispose()

    async def scalar(self, sql: str) -> Any:
        from sqlalchemy import text

        async with self.db.connect() as conn:
            return (await conn.execute(text(sql))).scalar()

    async def clean(self) -> None:
        """Empty every job table (api_keys and alembic_version stay) and Redis, between measurements."""
        from sqlalchemy import text

        async with self.db.begin() as conn:
            rows = await conn.execute(
                text(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() "
                    "AND table_name NOT IN ('api_keys', 'alembic_version')"
                )
            )
            tables = [r[0] for r in rows]
            await conn.execute(text("SET FOREIGN_KEY_CHECKS = 0"))
            for table in tables:
                await conn.execute(text(f"TRUNCATE TABLE `{table}`"))
            await conn.execute(text("SET FOREIGN_KEY_CHECKS = 1"))
            with contextlib.suppress(Exception):
                await conn.execute(text(f"TRUNCATE TABLE `{CELERY_DB}`.celery_taskmeta"))
        await self.rds.flushall()

    def spawn(self, name: str, argv: Sequence[str], **extra_env: str) -> Any:
        from bench.procs import spawn

        return spawn(name, argv, dict(self.env, **extra_env), ROOT, self.logs)

    def spawn_worker(self, name: str) -> Any:
        return self.spawn(name, [sys.executable, "-m", "arq", "workers.report_worker.WorkerSettings"])

    def spawn_raw_arq(self, name: str, **extra_env: str) -> Any:
        return self.spawn(name, [sys.executable, "-m", "arq", "bench.raw_arq.WorkerSettings"], **extra_env)

    def server_pids(self) -> dict[str, int]:
        pids: dict[str, int] = {}
        if self.mariadb.pid:
            pids["mariadbd"] = self.mariadb.pid
        if self.redis.pid:
            pids["redis"] = self.redis.pid
        return pids

    async def submit_many(self, count: int, concurrency: int = 16) -> float:
        """Submit `count` no-op jobs in-process through `app.service.submit` (insert + enqueue); jobs/s."""
        from app import service

        req = service.SubmitRequest(report_type="bench.noop", params={})
        remaining = count

        async def one() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await service.submit(TENANT, req)

        began = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(concurrency)))
        return count / (time.perf_counter() - began)

    async def mysql_status(self) -> dict[str, int]:
        """Server-wide statement, commit and redo-log fsync counters (SHOW GLOBAL STATUS)."""
        from sqlalchemy import text

        names = ", ".join(f"'{n}'" for n in MYSQL_COUNTERS)
        async with self.db.connect() as conn:
            rows = await conn.execute(text(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({names})"))
            return {str(name): int(value) for name, value in rows}

    async def per_job_statements(self, before: dict[str, int], jobs: int, polls: int) -> dict[str, float]:
        """MySQL work per job between `before` and now, less our own progress polls (1 SELECT each)."""
        after = await self.mysql_status()
        out: dict[str, float] = {}
        for name in MYSQL_COUNTERS:
            delta = after.get(name, 0) - before.get(name, 0)
            if name in ("Questions", "Com_select"):
                delta -= polls + 1  # +1: the SHOW STATUS itself counts as a question
            out[name] = round(delta / jobs, 2)
        return out

    async def done_count(self) -> int:
        return int(await self.scalar("SELECT COUNT(*) FROM report_jobs WHERE status = 'done'") or 0)

    # -- 1. submit ----------------------------------------------------------------------------------------

    async def start_api(self) -> None:
        import httpx

        from bench.procs import PROCS  # noqa: F401  (spawn registers the process for stop_all)
        from tests.servers import free_port

        self.api_port = free_port()
        argv = [
            sys.executable, "-m", "uvicorn", "bench.trivial_app:app", "--host", "127.0.0.1",
            "--port", str(self.api_port), "--workers", "1", "--no-access-log",
        ]  # fmt: skip
        if importlib.util.find_spec("uvloop"):
            argv += ["--loop", "uvloop"]
        if importlib.util.find_spec("httptools"):
            argv += ["--http", "httptools"]
        self.results["api_command"] = " ".join(argv[1:])
        self.api = self.spawn("api", argv)
        deadline = time.monotonic() + 60
        async with httpx.AsyncClient() as client:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{self.base_url}/healthz")).status_code == 200:
                        return
                if not self.api.alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"the API did not start:\n{self.api.tail()}")
                await asyncio.sleep(0.1)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    async def load(self, path: str, seconds: float) -> dict[str, Any]:
        """One load-generator run in its own process: 64 concurrent POSTs of the job body to `path`."""
        url = f"{self.base_url}{path}"
        auth = f"Bearer {self.api_key}"
        cpu = CpuMeter({"api": self.api.pid, **self.server_pids()}).start()
        if self.wrk:
            script = self.work / "post.lua"
            script.write_text(
                'wrk.method = "POST"\n'
                f"wrk.body = '{JOB_BODY}'\n"
                'wrk.headers["Content-Type"] = "application/json"\n'
                f'wrk.headers["Authorization"] = "{auth}"\n'
            )
            argv = [
                self.wrk,
                "-t2",
                f"-c{CONCURRENCY}",
                f"-d{seconds:g}s",
                "--latency",
                "-s",
                str(script),
                url,
            ]
            out = await asyncio.to_thread(run_cmd, argv, None, seconds + 60)
            summary = parse_wrk(out)
        else:
            argv = [
                sys.executable, "-m", "bench.loadgen", url, "--duration", str(seconds), "--concurrency",
                str(CONCURRENCY), "--body", JOB_BODY, "--header", f"Authorization: {auth}",
            ]  # fmt: skip
            out = await asyncio.to_thread(run_cmd, argv, self.env, seconds + 120)
            summary = json.loads(out.strip().splitlines()[-1])
        summary["cpu_pct"] = cpu.stop()
        return summary

    async def phase_submit(self) -> None:
        log(f"submit: {CONCURRENCY} concurrent clients, {SUBMIT_SECONDS:g} s each, load generator "
            f"{'wrk' if self.wrk else 'bench/loadgen.py (wrk missing)'}")  # fmt: skip
        await self.clean()
        await self.start_api()
        await self.load("/bench/noop", WARMUP_SECONDS)
        await self.load("/v1/jobs", WARMUP_SECONDS)
        await self.clean()
        trivial = await self.load("/bench/noop", SUBMIT_SECONDS)
        jobs_before = int(await self.scalar("SELECT COUNT(*) FROM report_jobs") or 0)
        status = await self.mysql_status()
        jobs = await self.load("/v1/jobs", SUBMIT_SECONDS)
        jobs["jobs_in_mysql"] = int(await self.scalar("SELECT COUNT(*) FROM report_jobs") or 0) - jobs_before
        jobs["mysql_per_job"] = await self.per_job_statements(status, max(1, jobs["jobs_in_mysql"]), 0)
        jobs["jobs_in_redis"] = int(await self.rds.zcard("arq:queue"))
        self.results["submit"] = {"trivial": trivial, "jobs": jobs}
        log(f"  trivial POST {trivial['ok_rps']:.0f} req/s p99 {trivial['p99_ms']:.1f} ms; "
            f"job POST {jobs['ok_rps']:.0f} accepted/s p99 {jobs['p99_ms']:.1f} ms "
            f"(non-2xx {jobs['requests'] - jobs['ok']})")  # fmt: skip

    # -- 2. drain -----------------------------------------------------------------------------------------

    async def watch(
        self, progress: Callable[[], Awaitable[int]], total: int, procs: Sequence[Any], interval_s: float
    ) -> dict[str, Any]:
        """Poll `progress` until it reaches `total`; the rate runs from the first completion to the last."""
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

    async def drain_ours(self, workers: int) -> dict[str, Any]:
        await self.clean()
        submit_rate = await self.submit_many(DRAIN_JOBS)
        queued = int(await self.rds.zcard("arq:queue"))
        status = await self.mysql_status()
        procs = [self.spawn_worker(f"worker-drain{workers}-{i}") for i in range(workers)]
        meter = CpuMeter({**{p.name: p.pid for p in procs}, **self.server_pids()}).start()
        try:
            result = await self.watch(self.done_count, DRAIN_JOBS, procs, 0.1)
            result["cpu_pct"] = meter.stop()
            result["mysql_per_job"] = await self.per_job_statements(
                status, DRAIN_JOBS, result["progress_polls"]
            )
        finally:
            for proc in procs:
                proc.stop()
        first, last = await self._finish_window()
        if first and last and last > first:
            result["jobs_per_s_mysql_timestamps"] = (DRAIN_JOBS - 1) / (last - first).total_seconds()
        result.update(submit_in_process_jobs_per_s=round(submit_rate, 1), queued_in_redis=queued)
        return result

    async def _finish_window(self) -> tuple[datetime | None, datetime | None]:
        from sqlalchemy import text

        async with self.db.connect() as conn:
            row = (
                await conn.execute(text("SELECT MIN(finished_at), MAX(finished_at) FROM report_jobs"))
            ).one()
        return row[0], row[1]

    async def drain_raw_arq(self, workers: int) -> dict[str, Any]:
        from arq import create_pool
        from arq.connections import RedisSettings

        from bench.raw_arq import RAW_FUNCTION, RAW_QUEUE, pool_kwargs

        await self.clean()
        pool = await create_pool(RedisSettings.from_dsn(self.redis.url), **pool_kwargs())
        try:
            began = time.perf_counter()
            for start in range(0, DRAIN_JOBS, 500):
                batch = range(start, min(start + 500, DRAIN_JOBS))
                await asyncio.gather(*(pool.enqueue_job(RAW_FUNCTION) for _ in batch))
            enqueue_rate = DRAIN_JOBS / (time.perf_counter() - began)
        finally:
            await pool.aclose()

        async def progress() -> int:
            return DRAIN_JOBS - int(await self.rds.zcard(RAW_QUEUE))

        procs = [self.spawn_raw_arq(f"raw-arq-drain{workers}-{i}") for i in range(workers)]
        meter = CpuMeter({**{p.name: p.pid for p in procs}, **self.server_pids()}).start()
        try:
            result = await self.watch(progress, DRAIN_JOBS, procs, 0.05)
            result["cpu_pct"] = meter.stop()
        finally:
            for proc in procs:
                proc.stop()
        result["enqueue_jobs_per_s"] = round(enqueue_rate, 1)
        return result

    async def drain_celery(self) -> dict[str, Any]:
        await self.clean()
        out = await asyncio.to_thread(
            run_cmd, [sys.executable, "-m", "bench.celery_app", str(DRAIN_JOBS)], self.env, 300
        )
        publish_rate = float(out.strip().splitlines()[-1])
        status = await self.mysql_status()

        async def progress() -> int:
            sql = f"SELECT COUNT(*) FROM `{CELERY_DB}`.celery_taskmeta WHERE status = 'SUCCESS'"
            return int(await self.scalar(sql) or 0)

        proc = self.spawn(
            "celery",
            [sys.executable, "-m", "celery", "-A", "bench.celery_app", "worker", "--pool=prefork",
             "--concurrency=2", "--loglevel=WARNING", "-n", "bench@%h"],
        )  # fmt: skip
        meter = CpuMeter({"celery (all processes)": proc.pid, **self.server_pids()}).start()
        try:
            result = await self.watch(progress, DRAIN_JOBS, [proc], 0.1)
            result["cpu_pct"] = meter.stop()
            result["mysql_per_job"] = await self.per_job_statements(
                status, DRAIN_JOBS, result["progress_polls"]
            )
        finally:
            proc.stop()
        result["publish_tasks_per_s"] = round(publish_rate, 1)
        return result

    async def phase_drain(self) -> None:
        log(f"drain: {DRAIN_JOBS} queued no-op jobs; ours and raw arq with 1 and 2 workers; Celery prefork 2")
        drain: dict[str, Any] = {}
        for workers in (1, 2):
            drain[f"ours_{workers}w"] = await self.drain_ours(workers)
            log(f"  ours, {workers} worker(s): {drain[f'ours_{workers}w']['jobs_per_s']:.0f} jobs/s")
        for workers in (1, 2):
            drain[f"raw_arq_{workers}w"] = await self.drain_raw_arq(workers)
            log(f"  raw arq, {workers} worker(s): {drain[f'raw_arq_{workers}w']['jobs_per_s']:.0f} jobs/s")
        drain["celery_prefork2"] = await self.drain_celery()
        log(f"  Celery prefork 2 + MySQL results: {drain['celery_prefork2']['jobs_per_s']:.0f} jobs/s")
        self.results["drain"] = drain

    # -- 3. pickup latency --------------------------------------------------------------------------------

    async def pickup_ours(self, poll_delay: float) -> dict[str, Any]:
        import httpx

        await self.clean()
        worker = self.spawn_worker("worker-pickup")
        headers = {"Authorization": f"Bearer {self.api_key}"}
        latencies: list[float] = []
        meter = CpuMeter({"worker": worker.pid, "api": self.api.pid, **self.server_pids()}).start()
        try:
            async with httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=30) as client:
                for i in range(PICKUP_SAMPLES + 3):  # the first 3 warm the worker up and are not counted
                    resp = await client.post(
                        "/v1/jobs", content=JOB_BODY, headers={"content-type": "application/json"}
                    )
                    submitted = time.time()
                    if resp.status_code != 202:
                        raise RuntimeError(f"submit answered {resp.status_code}: {resp.text[:300]}")
                    job_id = resp.json()["id"]
                    job = (await client.get(f"/v1/jobs/{job_id}", params={"wait": 20})).json()
                    if job["status"] != "done":
                        raise RuntimeError(f"pickup job ended {job['status']}:\n{worker.tail()}")
                    attempts = (await client.get(f"/v1/jobs/{job_id}/attempts")).json()
                    started = datetime.fromisoformat(attempts[0]["started_at"].replace("Z", "+00:00"))
                    if i >= 3:
                        latencies.append((started.timestamp() - submitted) * 1000)
                    await asyncio.sleep(dephase(poll_delay))
            cpu = meter.stop()
            idle = await self.idle_cpu(worker.pid)
        finally:
            worker.stop()
        return dict(self._pickup_summary(latencies, idle), cpu_pct=cpu)

    async def pickup_raw_arq(self, poll_delay: float) -> dict[str, Any]:
        from arq import create_pool
        from arq.connections import RedisSettings

        from bench.raw_arq import RAW_FUNCTION, STARTED_PREFIX, pool_kwargs

        await self.clean()
        worker = self.spawn_raw_arq(
            f"raw-arq-pickup-{poll_delay:g}", BENCH_RAW_RECORD="1", BENCH_RAW_POLL_DELAY=str(poll_delay)
        )
        pool = await create_pool(RedisSettings.from_dsn(self.redis.url), **pool_kwargs())
        latencies: list[float] = []
        meter = CpuMeter({"worker": worker.pid, **self.server_pids()}).start()
        try:
            for i in range(PICKUP_SAMPLES + 3):
                job_id = f"pickup-{i}"
                await pool.enqueue_job(RAW_FUNCTION, _job_id=job_id)
                submitted = time.time()
                got = await self.rds.blpop([f"{STARTED_PREFIX}{job_id}"], timeout=20)
                if got is None:
                    raise RuntimeError(f"raw arq never started {job_id}:\n{worker.tail()}")
                if i >= 3:
                    latencies.append((float(got[1]) - submitted) * 1000)
                await asyncio.sleep(dephase(poll_delay))
            cpu = meter.stop()
            idle = await self.idle_cpu(worker.pid)
        finally:
            await pool.aclose()
            worker.stop()
        result = dict(self._pickup_summary(latencies, idle), cpu_pct=cpu)
        result["poll_delay_s"] = poll_delay
        return result

    @staticmethod
    async def idle_cpu(pid: int) -> float:
        from bench.procs import cpu_seconds

        await asyncio.sleep(1.0)
        before, began = cpu_seconds(pid), time.monotonic()
        await asyncio.sleep(IDLE_SECONDS)
        return 100.0 * (cpu_seconds(pid) - before) / (time.monotonic() - began)

    @staticmethod
    def _pickup_summary(latencies: list[float], idle_cpu_pct: float) -> dict[str, Any]:
        return {
            "samples": len(latencies),
            "p50_ms": pct(latencies, 50),
            "p90_ms": pct(latencies, 90),
            "p99_ms": pct(latencies, 99),
            "mean_ms": statistics.fmean(latencies),
            "max_ms": max(latencies),
            "idle_cpu_pct_of_core": round(idle_cpu_pct, 2),
            "latencies_ms": [round(v, 2) for v in latencies],
        }

    async def phase_pickup(self) -> None:
        from app.config import get_settings

        ours_poll = get_settings().worker_poll_delay_s
        log(
            f"pickup: {PICKUP_SAMPLES} single submissions on an idle system, idle CPU over {IDLE_SECONDS:g} s"
        )
        pickup: dict[str, Any] = {"ours": await self.pickup_ours(ours_poll)}
        pickup["ours"]["poll_delay_s"] = ours_poll
        pickup["raw_arq_same_poll"] = await self.pickup_raw_arq(ours_poll)
        pickup["raw_arq_default_poll"] = await self.pickup_raw_arq(0.5)
        for name, fig in pickup.items():
            log(f"  {name}: p50 {fig['p50_ms']:.1f} ms p99 {fig['p99_ms']:.1f} ms, "
                f"idle CPU {fig['idle_cpu_pct_of_core']:.2f} %")  # fmt: skip
        self.results["pickup"] = pickup

    # -- 4. memory ----------------------------------------------------------------------------------------

    async def phase_memory(self) -> None:
        from bench.procs import rss_bytes

        log(f"memory: one worker's RSS over {MEMORY_JOBS} no-op jobs (submitted while it runs)")
        await self.clean()
        worker = self.spawn_worker("worker-memory")
        warm_after = max(100, MEMORY_JOBS // 50)
        samples: list[tuple[int, int]] = []
        try:
            await asyncio.sleep(2.0)
            cold = rss_bytes(worker.pid)
            began = time.perf_counter()
            submitter = asyncio.create_task(self.submit_many(MEMORY_JOBS, concurrency=8))
            warm: int | None = None
            time_left = RUN_BUDGET_S - (time.monotonic() - RUN_STARTED) - 10
            deadline = time.perf_counter() + max(30.0, time_left)
            last_done, last_change, time_boxed = -1, time.perf_counter(), False
            while True:
                done = await self.done_count()
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
                await asyncio.sleep(0.25)
            submitter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await submitter
            elapsed = time.perf_counter() - began
            await asyncio.sleep(1.0)
            end = rss_bytes(worker.pid)
        finally:
            worker.stop()
        assert warm is not None
        self.results["memory"] = {
            "jobs": samples[-1][0],
            "jobs_wanted": MEMORY_JOBS,
            "time_boxed": time_boxed,
            "warm_up_jobs": warm_after,
            "rss_cold_mb": round(cold / 2**20, 2),
            "rss_warm_mb": round(warm / 2**20, 2),
            "rss_end_mb": round(end / 2**20, 2),
            "growth_pct_from_warm": round(100.0 * (end - warm) / warm, 2),
            "growth_pct_from_cold": round(100.0 * (end - cold) / cold, 2),
            "samples_done_rss_mb": [(d, round(r / 2**20, 2)) for d, r in samples],
            "seconds": round(elapsed, 1),
        }
        mem = self.results["memory"]
        log(f"  {mem['jobs']} jobs in {mem['seconds']} s: RSS cold {mem['rss_cold_mb']} MB, warm "
            f"{mem['rss_warm_mb']} MB, end {mem['rss_end_mb']} MB "
            f"(+{mem['growth_pct_from_warm']} % from warm)"
            + (" — time-boxed" if mem["time_boxed"] else ""))  # fmt: skip

    # -- machine ------------------------------------------------------------------------------------------

    def machine(self) -> dict[str, Any]:
        cpu_model = "unknown"
        with contextlib.suppress(OSError):
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
        mem_total = "unknown"
        with contextlib.suppress(OSError):
            mem_total = Path("/proc/meminfo").read_text().splitlines()[0].split(":", 1)[1].strip()
        commit = version_of(["git", "-C", str(ROOT), "rev-parse", "HEAD"])
        dirty = bool(version_of(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"]))
        packages: dict[str, str] = {}
        from importlib.metadata import PackageNotFoundError, version

        for name in (
            "arq",
            "celery",
            "fastapi",
            "uvicorn",
            "sqlalchemy",
            "asyncmy",
            "redis",
            "uvloop",
            "httptools",
        ):
            with contextlib.suppress(PackageNotFoundError):
                packages[name] = version(name)
        return {
            "nproc": os.cpu_count(),
            "cpu_model": cpu_model,
            "memory": mem_total,
            "kernel": platform.release(),
            "python": platform.python_version(),
            "mariadb": version_of([self.mariadb.mariadbd, "--version"]),
            "redis": version_of([self.redis.binary, "--version"]),
            "wrk": version_of([self.wrk, "-v"]).splitlines()[0] if self.wrk else None,
            "git_commit": commit,
            "git_dirty": dirty,
            "packages": packages,
            "innodb_options": list(self.mariadb.INNODB_OPTIONS),
            "flush_at_commit": MYSQL_FLUSH_AT_COMMIT,
        }


def parse_wrk(out: str) -> dict[str, Any]:
    """Requests, non-2xx, duration and latency percentiles from `wrk --latency` output."""

    def to_ms(value: str, unit: str) -> float:
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]

    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m),", out)
    if not m:
        raise RuntimeError(f"cannot parse wrk output:\n{out}")
    requests = int(m.group(1))
    duration_s = to_ms(m.group(2), m.group(3)) / 1000
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    bad = int(non2xx.group(1)) if non2xx else 0
    percentiles = {
        int(q): to_ms(v, u)
        for q, v, u in re.findall(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s|m)\s*$", out, re.M)
    }
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    ok = requests - bad
    return {
        "tool": "wrk",
        "duration_s": duration_s,
        "requests": requests,
        "ok": ok,
        "rps": requests / duration_s,
        "ok_rps": ok / duration_s,
        "p50_ms": percentiles.get(50, math.nan),
        "p90_ms": percentiles.get(90, math.nan),
        "p99_ms": percentiles.get(99, math.nan),
        "socket_errors": [int(x) for x in sock.groups()] if sock else [0, 0, 0, 0],
    }


# ---- the table -----------------------------------------------------------------------------------


@dataclass
class Row:
    what: str
    ours: str
    baseline: str
    ratio: float | None
    target: str
    met: bool | str | None

    def cells(self) -> list[str]:
        ratio = "—" if self.ratio is None or math.isnan(self.ratio) else f"{self.ratio:.2f}×"
        if isinstance(self.met, str):
            met = self.met
        else:
            met = "—" if self.met is None else ("yes" if self.met else "**no**")
        return [self.what, self.ours, self.baseline, ratio, self.target, met]


def build_rows(res: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    sub = res.get("submit")
    if sub:
        t, j = sub["trivial"], sub["jobs"]
        ratio = j["ok_rps"] / t["ok_rps"]
        rows.append(Row(
            "submit: accepted jobs/s (64 clients)", f"{j['ok_rps']:,.0f}/s",
            f"trivial POST {t['ok_rps']:,.0f}/s", ratio, "≥ 1,200/s and ≥ 0.43×",
            j["ok_rps"] >= 1200 and ratio >= 0.43,
        ))  # fmt: skip
        rows.append(Row(
            "submit: p50 latency", f"{j['p50_ms']:.1f} ms", f"trivial POST {t['p50_ms']:.1f} ms",
            j["p50_ms"] / t["p50_ms"], "—", None,
        ))  # fmt: skip
        rows.append(Row(
            "submit: p99 latency", f"{j['p99_ms']:.1f} ms", f"trivial POST {t['p99_ms']:.1f} ms",
            j["p99_ms"] / t["p99_ms"], "≤ 100 ms", j["p99_ms"] <= 100,
        ))  # fmt: skip
    drain = res.get("drain")
    if drain:
        for w in (1, 2):
            ours, raw = drain[f"ours_{w}w"]["jobs_per_s"], drain[f"raw_arq_{w}w"]["jobs_per_s"]
            rows.append(Row(
                f"drain, {w} worker process{'es' if w > 1 else ''}: jobs/s to done in MySQL",
                f"{ours:,.0f}/s", f"raw arq, {w} proc, same settings {raw:,.0f}/s", ours / raw, "≥ 1.0×",
                ours / raw >= 1.0,
            ))  # fmt: skip
        ours, cel = drain["ours_2w"]["jobs_per_s"], drain["celery_prefork2"]["jobs_per_s"]
        rows.append(Row(
            "drain, 2 worker processes vs Celery", f"{ours:,.0f}/s",
            f"Celery prefork 2 + MySQL results {cel:,.0f}/s", ours / cel, "≥ 3×", ours / cel >= 3,
        ))  # fmt: skip
    pick = res.get("pickup")
    if pick:
        o, same, dflt = pick["ours"], pick["raw_arq_same_poll"], pick["raw_arq_default_poll"]
        poll = f"poll {same['poll_delay_s']:g} s"
        rows.append(Row(
            "pickup latency p50 (202 → started)", f"{o['p50_ms']:.1f} ms",
            f"raw arq {poll} {same['p50_ms']:.1f} ms", o["p50_ms"] / same["p50_ms"], "≤ 10 ms",
            o["p50_ms"] <= 10,
        ))  # fmt: skip
        rows.append(Row(
            "pickup latency p99", f"{o['p99_ms']:.1f} ms", f"raw arq {poll} {same['p99_ms']:.1f} ms",
            o["p99_ms"] / same["p99_ms"], "≤ 25 ms", o["p99_ms"] <= 25,
        ))  # fmt: skip
        rows.append(Row(
            "pickup latency p50 vs arq defaults", f"{o['p50_ms']:.1f} ms",
            f"raw arq poll 0.5 s {dflt['p50_ms']:.1f} ms", o["p50_ms"] / dflt["p50_ms"], "—", None,
        ))  # fmt: skip
        idle, idle_raw = o["idle_cpu_pct_of_core"], same["idle_cpu_pct_of_core"]
        rows.append(Row(
            "idle worker CPU", f"{idle:.2f} % of a core", f"raw arq {poll} {idle_raw:.2f} %",
            idle / idle_raw if idle_raw > 0 else None, "≤ 1 %", idle <= 1.0,
        ))  # fmt: skip
    mem = res.get("memory")
    if mem:
        rows.append(Row(
            f"worker RSS over {mem['jobs']:,} jobs"
            + (f" (time-boxed, {mem['jobs_wanted']:,} wanted)" if mem["time_boxed"] else ""),
            f"{mem['rss_end_mb']:.1f} MB (+{mem['growth_pct_from_warm']:.1f} %)",
            f"RSS after {mem['warm_up_jobs']:,}-job warm-up {mem['rss_warm_mb']:.1f} MB",
            mem["rss_end_mb"] / mem["rss_warm_mb"], f"growth ≤ 5 % over {mem['jobs_wanted']:,}",
            "n/a (cut short)" if mem["time_boxed"] else mem["growth_pct_from_warm"] <= 5,
        ))  # fmt: skip
    return rows


def interference(res: dict[str, Any]) -> list[float]:
    """Every `others` CPU figure in the results: load on the machine that this run did not cause."""
    found: list[float] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("others"), int | float) and "machine" in value:
                found.append(float(value["others"]))
            for child in value.values():
                walk(child)

    walk(res)
    return found


def markdown(res: dict[str, Any]) -> str:
    header = ["what", "ours", "baseline (same run)", "ratio ours÷baseline", "target (issue 8)", "met?"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in build_rows(res)]
    m = res["machine"]
    flush = m.get("flush_at_commit", MYSQL_FLUSH_AT_COMMIT)
    notes = [
        f"# Benchmark {res['date']} (BENCH_SCALE={res['scale']:g})",
        "",
        f"Machine: {m['nproc']} × {m['cpu_model']}, {m['memory']}; Python {m['python']}; {m['mariadb']}; "
        f"{m['redis']}; commit {m['git_commit'][:10]}{' (dirty tree)' if m['git_dirty'] else ''}; "
        f"total {res['total_seconds']:.0f} s.",
        "",
        *lines,
        "",
        "Ratios are ours ÷ baseline: above 1 is better for throughput, below 1 is better for latency.",
        interference_note(res),
        "",
        "Where the time goes (CPU of a process ÷ its rate; MySQL counters from SHOW GLOBAL STATUS, "
        "the benchmark's own progress polls subtracted):",
        "",
        *cost_rows(res),
        "",
        f"Submit: `{res.get('api_command', '')}`, load from {res['load_generator']} in its own process. "
        "Drain: jobs queued with the workers stopped; rate from the first completion seen to the last. "
        "Pickup: one job at a time on an idle system, each pause ending at a random point of the poll "
        "cycle; latency = the attempt's `started_at` − the moment the 202 arrived (raw arq: the function's "
        "first line − the return of `enqueue_job`). Idle CPU: the worker alone, 1 s after its last job. "
        + memory_note(res)
        + f"MariaDB innodb_flush_log_at_trx_commit={flush}. "
        "Raw figures: the JSON beside this file.",
    ]
    return "\n".join(notes) + "\n"


META_CPU_KEYS = frozenset({"mariadbd", "redis", "bench_runner", "load_generator", "machine", "others"})


def cost_rows(res: dict[str, Any]) -> list[str]:
    """Where the time goes: CPU milliseconds per job in each process kind, and MySQL work per job."""
    cases: list[tuple[str, float, dict[str, Any]]] = []
    sub = res.get("submit", {})
    for key, label in (("trivial", "submit: trivial POST"), ("jobs", "submit: POST /v1/jobs")):
        if key in sub:
            cases.append((label, sub[key]["ok_rps"], sub[key]))
    labels = {
        "ours_1w": "drain: ours, 1 worker",
        "ours_2w": "drain: ours, 2 workers",
        "raw_arq_1w": "drain: raw arq, 1 worker",
        "raw_arq_2w": "drain: raw arq, 2 workers",
        "celery_prefork2": "drain: Celery prefork 2",
    }
    for key, label in labels.items():
        if key in res.get("drain", {}):
            cases.append((label, res["drain"][key]["jobs_per_s"], res["drain"][key]))
    if not cases:
        return []
    lines = [
        "| path | jobs/s | CPU ms per job: app processes | MariaDB | Redis | MySQL statements / commits / "
        "fsyncs per job | others' CPU |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, rate, fig in cases:
        cpu = fig.get("cpu_pct", {})
        app_pct = sum(v for k, v in cpu.items() if k not in META_CPU_KEYS)

        def ms(pct_of_core: float, rate: float = rate) -> str:
            return f"{10.0 * pct_of_core / rate:.2f}" if rate else "—"

        mysql = fig.get("mysql_per_job")
        stmts = (
            f"{mysql['Questions']:.1f} / {mysql['Com_commit']:.1f} / {mysql['Innodb_data_fsyncs']:.1f}"
            if mysql
            else "—"
        )
        lines.append(
            f"| {label} | {rate:,.0f} | {ms(app_pct)} | {ms(cpu.get('mariadbd', 0.0))} | "
            f"{ms(cpu.get('redis', 0.0))} | {stmts} | {max(0.0, cpu.get('others', 0.0)):.0f} % |"
        )
    return lines


def memory_note(res: dict[str, Any]) -> str:
    mem = res.get("memory")
    if not mem:
        return ""
    return (
        f"Memory: RSS of one worker, growth counted from after a {mem['warm_up_jobs']:,}-job warm-up "
        f"(from its idle start: {mem['rss_cold_mb']:.1f} → {mem['rss_end_mb']:.1f} MB, "
        f"+{mem['growth_pct_from_cold']:.1f} %). "
    )


def interference_note(res: dict[str, Any]) -> str:
    others = interference(res)
    if not others:
        return ""
    mean, worst = statistics.fmean(others), max(others)
    verdict = (
        "quiet enough to compare."
        if worst < 25
        else "**the machine was shared: figures are noisy, rerun on an idle machine before trusting them.**"
    )
    return (
        f"Processes this run did not start used {mean:.0f} % of a core on average during the measurements "
        f"(worst {worst:.0f} %, of {os.cpu_count() or 0}00 %): {verdict}"
    )


# ---- main ----------------------------------------------------------------------------------------


async def run_phases(bench: Bench) -> None:
    await bench.connect()
    try:
        wanted = [p.strip() for p in os.environ.get("BENCH_PHASES", "submit,drain,pickup,memory").split(",")]
        if "submit" in wanted or "pickup" in wanted:
            if "submit" in wanted:
                await bench.phase_submit()
            else:
                await bench.start_api()
        if "drain" in wanted:
            await bench.phase_drain()
        if "pickup" in wanted:
            await bench.phase_pickup()
        if bench.api is not None:
            bench.api.stop()
        if "memory" in wanted:
            await bench.phase_memory()
    finally:
        await bench.close()


def _raise_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    ensure_bench_group()
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    from bench.procs import stop_all

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
        total_seconds=round(time.perf_counter() - started, 1),
        load_generator="wrk" if wrk else "bench/loadgen.py (asyncio)",
        machine=bench.machine(),
        parameters={
            "concurrency": CONCURRENCY, "submit_seconds": SUBMIT_SECONDS, "drain_jobs": DRAIN_JOBS,
            "pickup_samples": PICKUP_SAMPLES, "idle_seconds": IDLE_SECONDS, "memory_jobs": MEMORY_JOBS,
        },
    )  # fmt: skip
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stem = res["date"] if SCALE == 1 else f"{res['date']}-scale{SCALE:g}"
    (RESULTS_DIR / f"{stem}.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
    text = markdown(res)
    (RESULTS_DIR / f"{stem}.md").write_text(text)
    print()
    print(text)
    log(f"wrote bench/results/{stem}.json and .md in {res['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()
