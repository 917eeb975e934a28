"""The state one benchmark run shares between its phases: private MariaDB and Redis, the environment of the
processes it starts, its own connections, the API under test, and the results gathered so far."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import (
    API_WORKERS,
    BULK_BATCH,
    CELERY_DB,
    MYSQL_COUNTERS,
    MYSQL_FLUSH_AT_COMMIT,
    ROOT,
    TENANT,
    log,
    run_cmd,
)
from bench.procs import Proc, spawn

API_START_TIMEOUT_S = 60.0
# Settings the benchmark's own in-process submissions (submit_many) read from its environment.
APP_SETTINGS = ("DATABASE_URL", "REDIS_URL", "REPORT_MODULES", "ENABLE_DEMO_REPORTS", "OUTPUT_DIR", "ENV")


@dataclass
class ApiServer:
    """One uvicorn server (1 process, or a supervisor and `workers` processes) serving the API
    (bench/trivial_app.py) on a port of its own; its CPU is counted over its whole process group."""

    proc: Proc
    port: int
    command: str
    workers: int = 1

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class Bench:
    def __init__(self, work: Path, wrk: str | None) -> None:
        # Imported here: bench/run.py checks the bench dependency group before anything heavy is imported.
        from bench.servers import BenchMariaDB
        from devtools.servers import RedisServer

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
        self.api: Proc | None = None
        self.db: Any = None  # SQLAlchemy AsyncEngine on the private MariaDB, for the benchmark's own queries
        self.rds: Any = None  # redis.asyncio.Redis on the private Redis

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
            BENCH_DRAMATIQ_BROKER=self.redis.url.rsplit("/", 1)[0] + "/2",
            BENCH_DRAMATIQ_MYSQL=f"mysql://root@127.0.0.1:{self.mariadb.port}/{CELERY_DB}",
        )
        for key in APP_SETTINGS:
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
        from app.core import redis_pool
        from app.core.db import dispose_engine

        with contextlib.suppress(Exception):
            await redis_pool.close_pool()
        with contextlib.suppress(Exception):
            await dispose_engine()
        if self.rds is not None:
            with contextlib.suppress(Exception):
                await self.rds.aclose()
        if self.db is not None:
            with contextlib.suppress(Exception):
                await self.db.dispose()

    # -- MySQL and Redis ----------------------------------------------------------------------------------

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
            out[name] = round(delta / jobs, 4)  # bulk submit's share per job is well under 0.01
        return out

    async def done_count(self) -> int:
        return int(await self.scalar("SELECT COUNT(*) FROM report_jobs WHERE status = 'done'") or 0)

    async def submit_many(self, count: int, concurrency: int = 16) -> float:
        """Queue `count` no-op jobs in-process, the way the API would (rows committed, then enqueued); jobs/s.

        With bulk submit (`app.jobs.batch.submit_batch`), BULK_BATCH jobs a call on `concurrency` ÷ 4 tasks
        (at least 2): the queue fills faster and the benchmark takes less CPU from the workers it measures
        while it does; else one `app.jobs.service.submit` a job on `concurrency` tasks."""
        from app.jobs import service

        req = service.SubmitRequest(report_type="bench.noop", params={})
        remaining = count
        try:
            from app.jobs.batch import BatchEntry, submit_batch
        except ImportError:
            submit_batch = None

        async def singles() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await service.submit(TENANT, req)

        async def batches() -> None:
            nonlocal remaining
            assert submit_batch is not None
            while remaining > 0:
                size = min(BULK_BATCH, remaining)
                remaining -= size
                outcomes = await submit_batch(TENANT, [BatchEntry(req)] * size)
                refused = [o for o in outcomes if isinstance(o, Exception)]
                if refused:
                    raise RuntimeError(f"bulk submit refused {len(refused)} of {size}: {refused[0]!r}")

        began = time.perf_counter()
        if submit_batch is None:
            self.results.setdefault("queued_with", "app.jobs.service.submit, one job a call")
            await asyncio.gather(*(singles() for _ in range(concurrency)))
        else:
            self.results.setdefault("queued_with", f"app.jobs.batch.submit_batch, {BULK_BATCH} jobs a call")
            await asyncio.gather(*(batches() for _ in range(max(2, concurrency // 4))))
        return count / (time.perf_counter() - began)

    # -- processes ----------------------------------------------------------------------------------------

    def spawn(self, name: str, argv: list[str], **extra_env: str) -> Proc:
        return spawn(name, argv, dict(self.env, **extra_env), ROOT, self.logs)

    def spawn_worker(self, name: str, **extra_env: str) -> Proc:
        """One of our report workers, started as in production (plus `extra_env` settings)."""
        return self.spawn(name, [sys.executable, "-m", "workers.report_worker"], **extra_env)

    def spawn_raw_arq(self, name: str, **extra_env: str) -> Proc:
        """The raw-arq baseline: arq's own CLI, so arq's plain Worker class (bench/raw_arq.py)."""
        return self.spawn(name, [sys.executable, "-m", "arq", "bench.raw_arq.WorkerSettings"], **extra_env)

    def server_pids(self) -> dict[str, int]:
        pids: dict[str, int] = {}
        if self.mariadb.pid:
            pids["mariadbd"] = self.mariadb.pid
        if self.redis.pid:
            pids["redis"] = self.redis.pid
        return pids

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    async def start_api(self) -> None:
        """uvicorn serving bench/trivial_app.py (the real API plus a trivial POST) with API_WORKERS processes:
        the job POSTs and the trivial POST they are compared with share the one server, so the same count."""
        server = await self.launch_api(workers=API_WORKERS)
        self.api, self.api_port = server.proc, server.port
        self.results["api_command"] = server.command
        self.results["api_workers"] = server.workers

    async def launch_api(self, name: str = "api", workers: int = 1, **extra_env: str) -> ApiServer:
        """Start one more API server of `workers` uvicorn processes (its settings overridden by `extra_env`)
        and wait until every process answers /healthz (or, for several, until `workers` distinct pids did)."""
        import httpx

        from devtools.servers import free_port

        port = free_port()
        argv = [
            sys.executable, "-m", "uvicorn", "bench.trivial_app:app", "--host", "127.0.0.1",
            "--port", str(port), "--workers", str(workers), "--no-access-log",
        ]  # fmt: skip
        if importlib.util.find_spec("uvloop"):
            argv += ["--loop", "uvloop"]
        if importlib.util.find_spec("httptools"):
            argv += ["--http", "httptools"]
        # API_WORKERS too, for a settings check that reads it; uvicorn's --workers starts the processes here.
        extra_env.setdefault("API_WORKERS", str(workers))
        server = ApiServer(self.spawn(name, argv, **extra_env), port, " ".join(argv[1:]), workers)
        deadline = time.monotonic() + API_START_TIMEOUT_S
        async with httpx.AsyncClient() as client:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    healthy = (await client.get(f"{server.base_url}/healthz")).status_code == 200
                    if healthy and (workers == 1 or len(api_processes(server.proc.pid)) >= workers):
                        return server
                if not server.proc.alive() or time.monotonic() > deadline:
                    server.proc.stop()
                    raise RuntimeError(f"the API ({name}) did not start:\n{server.proc.tail()}")
                await asyncio.sleep(0.1)

    def stop_api(self) -> None:
        if self.api is not None:
            self.api.stop()
            self.api = None


def api_processes(supervisor_pid: int) -> list[int]:
    """The uvicorn worker processes under a `--workers N` supervisor: its children started by
    multiprocessing's spawn_main (not its resource tracker), from /proc. The warm-up load that follows covers
    their application start-up."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == supervisor_pid and b"spawn_main" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found
