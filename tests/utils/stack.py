"""The end-to-end harness: real api, worker, dead-letter and scheduler processes started by PID against
private MariaDB and Redis servers, each logging to its own file."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import redis

from devtools.servers import MariaDBServer, RedisServer, ensure_binaries, free_port

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable

STUCK_AFTER_S = 2.0
SCAN_INTERVAL_S = 0.5

#: Settings every child process gets (on top of DATABASE_URL, REDIS_URL and OUTPUT_DIR).
E2E_ENV: dict[str, str] = {
    "ENV": "test",
    "ENABLE_DEMO_REPORTS": "true",
    "RETRY_DELAYS_S": "[0.2, 0.4, 0.6]",
    "STUCK_AFTER_S": str(STUCK_AFTER_S),
    "SCAN_INTERVAL_S": str(SCAN_INTERVAL_S),
    "JOB_TIMEOUT_S": "30",
    "WORKER_POLL_DELAY_S": "0.02",
    "WORKER_SHUTDOWN_GRACE_S": "5",
    "API_KEY_CACHE_TTL_S": "0",
    "LOG_JSON": "false",
    "LOG_LEVEL": "INFO",
    "ALERT_COALESCE_S": "0.2",
    "NOTICE_COALESCE_S": "0.2",
    "ALERT_TIMEOUT_S": "0.5",
    "ALERT_RETRY_MAX_S": "0.5",
    "PYTHONUNBUFFERED": "1",
    "NO_PROXY": "127.0.0.1,localhost",
}
TABLES = (
    "remote_attempts",
    "job_attempts",
    "dead_letters",
    "report_jobs",
    "api_keys",
    "worker_processes",
    "schedule_runs",
    "schedules",
    "tenant_policies",
    "report_type_policies",
    "destinations",
    "notify_routes",
    "open_letter_counts",
    "report_deliveries",
    "notice_digests",
    "notice_digest_slots",
)
MAIN_HEALTH_KEY = "arq:queue:health-check"
DEAD_LETTER_HEALTH_KEY = "arq:dead-letters:health-check"
READY_TIMEOUT_S = 30.0
#: Log lines left out of the tails shown on failure (APScheduler's per-tick chatter at INFO).
NOISE = ("apscheduler.executors",)


def _inherited_env() -> dict[str, str]:
    """os.environ without anything that would configure the app (another test may have exported some)."""
    from app.core.config import Settings

    settings_names = {name.upper() for name in Settings.model_fields}
    drop = settings_names | {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"}
    return {k: v for k, v in os.environ.items() if k.upper() not in drop}


# ---- processes --------------------------------------------------------------------------------------


class ProcessDied(RuntimeError):
    pass


class Proc:
    """One child process in its own session, logging stdout+stderr to a file; stopped by PID."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.log_path = log_path
        self.popen: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def start(self) -> Proc:
        self._log = self.log_path.open("ab")
        self.popen = subprocess.Popen(
            self.argv,
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None, f"{self.name} was never started"
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def wait(self, timeout: float) -> int:
        assert self.popen is not None
        return self.popen.wait(timeout=timeout)

    def send(self, sig: signal.Signals) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait for the exit; returns the exit code."""
        self.send(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> int:
        """SIGKILL (a crash) and reap."""
        self.send(signal.SIGKILL)
        return self.wait(10)

    def check_alive(self) -> None:
        if not self.alive:
            raise ProcessDied(f"{self.name} (pid {self.pid}) exited with {self.returncode}:\n{self.tail()}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 60) -> str:
        kept = [line for line in self.log_text().splitlines() if not any(n in line for n in NOISE)]
        return "\n".join(kept[-lines:])

    def cleanup(self) -> None:
        """Stop it if still running (SIGTERM, then SIGKILL to its own process group) and close the log."""
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)  # its own session: only its group
                self.popen.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None


def wait_until(
    predicate: Callable[[], bool],
    timeout: float,
    what: str,
    procs: Iterable[Proc] = (),
    interval: float = 0.05,
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        for proc in procs:
            proc.check_alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


# ---- servers and the stack ---------------------------------------------------------------------------


@dataclass
class Servers:
    db: MariaDBServer
    redis: RedisServer

    def ensure_running(self) -> None:
        self.db.start()  # no-op when running
        self.redis.start()


@contextlib.contextmanager
def private_servers() -> Iterator[Servers]:
    """A private MariaDB and Redis on free ports, migrated, removed at the end (tests may kill them)."""
    ensure_binaries()
    servers = Servers(MariaDBServer(), RedisServer())
    try:
        servers.db.start()
        servers.redis.start()
        migrate(servers.db.url)
        yield servers
    finally:
        servers.db.cleanup()
        servers.redis.cleanup()


def migrate(db_url: str) -> None:
    env = dict(_inherited_env(), DATABASE_URL=db_url)
    done = subprocess.run(
        [PYTHON, "-m", "alembic", "upgrade", "head"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"alembic upgrade head failed:\n{done.stdout}\n{done.stderr}"


class Stack:
    """Starts the project's processes for one test and stops them all at its end."""

    def __init__(self, servers: Servers, workdir: Path) -> None:
        self.servers = servers
        self.dir = workdir
        self.output_dir = workdir / "outputs"
        self.logs_dir = workdir / "logs"
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.procs: list[Proc] = []
        #: Extra settings for every process started from now on (e.g. the DingTalk webhook).
        self.overrides: dict[str, str] = {}
        self.api_url = ""
        self.api_key = ""

    # -- environment and spawning ------------------------------------------------------------------

    def env(self, **extra: Any) -> dict[str, str]:
        env = _inherited_env()
        env.update(E2E_ENV)
        env.update(
            DATABASE_URL=self.servers.db.url,
            REDIS_URL=self.servers.redis.url,
            OUTPUT_DIR=str(self.output_dir),
        )
        env.update(self.overrides)
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def spawn(self, kind: str, argv: list[str], **extra: Any) -> Proc:
        same_kind = sum(1 for p in self.procs if p.name.rsplit("-", 1)[0] == kind)
        name = f"{kind}-{same_kind + 1}"
        proc = Proc(name, argv, self.env(**extra), self.logs_dir / f"{name}.log")
        self.procs.append(proc)
        return proc.start()

    def respawn(self, proc: Proc) -> Proc:
        """Start a fresh copy of an exited process (what a supervisor would do); no readiness wait."""
        kind = proc.name.rsplit("-", 1)[0]
        same_kind = sum(1 for p in self.procs if p.name.rsplit("-", 1)[0] == kind)
        name = f"{kind}-{same_kind + 1}"
        fresh = Proc(name, proc.argv, proc.env, self.logs_dir / f"{name}.log")
        self.procs.append(fresh)
        return fresh.start()

    def redis_client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.servers.redis.port, socket_timeout=2)

    def _start_arq(self, kind: str, module: str, health_key: str, **extra: Any) -> Proc:
        client = self.redis_client()
        try:
            client.delete(health_key)
            proc = self.spawn(kind, [PYTHON, "-m", module], **extra)
            # The first poll iteration (after on_startup) writes the queue's health-check key.
            wait_until(lambda: bool(client.exists(health_key)), READY_TIMEOUT_S, f"{proc.name} ready", [proc])
        finally:
            client.close()
        return proc

    def start_api(self, **extra: Any) -> Proc:
        port = free_port()
        proc = self.spawn(
            "api",
            [PYTHON, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1", "--port", str(port)],
            **extra,
        )
        url = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            try:
                return httpx.get(f"{url}/healthz", timeout=1.0, trust_env=False).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(healthy, READY_TIMEOUT_S, f"{proc.name} /healthz", [proc], interval=0.1)
        if not self.api_url:
            self.api_url = url
        return proc

    def start_worker(self, **extra: Any) -> Proc:
        return self._start_arq("worker", "workers.report_worker", MAIN_HEALTH_KEY, **extra)

    def start_dead_letter(self, **extra: Any) -> Proc:
        return self._start_arq("deadletter", "workers.dead_letter", DEAD_LETTER_HEALTH_KEY, **extra)

    def start_scheduler(self, **extra: Any) -> Proc:
        proc = self.spawn("scheduler", [PYTHON, "-m", "workers.scheduler"], **extra)
        wait_until(lambda: "scheduler started" in proc.log_text(), READY_TIMEOUT_S, proc.name, [proc])
        return proc

    def create_key(self, tenant: str = "acme", scopes: str = "jobs:read,jobs:write,admin") -> str:
        done = subprocess.run(
            [PYTHON, "-m", "app.cli", "keys", "create", "--tenant", tenant, "--scopes", scopes],
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
        assert done.returncode == 0 and lines, f"keys create failed:\n{done.stdout}\n{done.stderr}"
        return lines[-1]

    def client(self, timeout: float = 15.0) -> httpx.AsyncClient:
        assert self.api_url, "start_api() first"
        return httpx.AsyncClient(
            base_url=self.api_url,
            headers={"Authorization": f"Bearer {self.api_key}"},
            timeout=timeout,
            trust_env=False,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
        )

    def proc_by_pid(self, pid: int) -> Proc | None:
        return next((p for p in self.procs if p.popen is not None and p.pid == pid), None)

    # -- database ------------------------------------------------------------------------------------

    def sql(self, statement: str) -> list[list[str]]:
        out = self.servers.db.sql(statement, database=self.servers.db.database)
        return [line.split("\t") for line in out.splitlines() if line]

    def scalar(self, statement: str) -> str:
        rows = self.sql(statement)
        assert rows and rows[0], f"no row for {statement!r}"
        return rows[0][0]

    def job_worker_pid(self, job_id: str) -> int | None:
        """The PID in report_jobs.worker (`<hostname>:<pid>`) of a running job, else None."""
        rows = self.sql(f"SELECT status, worker FROM report_jobs WHERE id = '{job_id}'")
        if not rows or rows[0][0] != "running" or rows[0][1] in ("", "NULL"):
            return None
        return int(rows[0][1].rsplit(":", 1)[1])

    def status_counts(self, where: str = "1=1") -> dict[str, int]:
        rows = self.sql(f"SELECT status, COUNT(*) FROM report_jobs WHERE {where} GROUP BY status")
        return {status: int(count) for status, count in rows}

    # -- teardown and diagnostics ---------------------------------------------------------------------

    def log_report(self, lines: int = 60) -> str:
        parts = []
        for proc in self.procs:
            state = "running" if proc.alive else f"exited {proc.returncode}"
            parts.append(f"===== {proc.name} (pid {proc.popen.pid if proc.popen else '-'}, {state}) =====")
            parts.append(proc.tail(lines))
        return "\n".join(parts) or "(no processes were started)"

    def cleanup(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(Exception):
                proc.cleanup()
