"""What every private server of the harness shares: free ports, binaries, the child-process lifecycle and
the reaping of orphans a crashed run left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, ClassVar, Self

from devtools import children

#: Ports of the machine's own servers: the harness refuses to use them.
SYSTEM_PORTS: frozenset[int] = frozenset({3306, 6379})
#: Prefix of every temp dir the harness creates (used to find orphans of crashed runs).
DIR_PREFIX = "report-orchestrator-test-"
_OWNER_FILE = "harness-owner.json"
_SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin", "/sbin"])


class MissingBinariesError(RuntimeError):
    """A server binary needed by the harness is not installed."""


class ServerStartError(RuntimeError):
    """A child server did not come up (the message carries the tail of its log)."""


def free_port() -> int:
    """Return a currently free TCP port on 127.0.0.1 (never one of SYSTEM_PORTS)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port not in SYSTEM_PORTS:
            return port


def _find_binary(preferred: str, *names: str) -> str | None:
    if os.access(preferred, os.X_OK):
        return preferred
    for name in names:
        found = shutil.which(name, path=_SEARCH_PATH)
        if found:
            return found
    return None


def _redis_binaries() -> dict[str, str | None]:
    return {"redis-server": _find_binary("/usr/bin/redis-server", "redis-server")}


def _mariadb_binaries() -> dict[str, str | None]:
    return {
        "mariadbd": _find_binary("/usr/sbin/mariadbd", "mariadbd", "mysqld"),
        "mariadb-install-db": _find_binary(
            "/usr/bin/mariadb-install-db", "mariadb-install-db", "mysql_install_db"
        ),
        "mariadb": _find_binary("/usr/bin/mariadb", "mariadb", "mysql"),
    }


def ensure_binaries(redis: bool = True, mariadb: bool = True) -> None:
    """Raise MissingBinariesError (naming the apt packages) unless the requested servers are installed."""
    found: dict[str, str | None] = {}
    if redis:
        found.update(_redis_binaries())
    if mariadb:
        found.update(_mariadb_binaries())
    missing = sorted(name for name, path in found.items() if path is None)
    if missing:
        raise MissingBinariesError(
            f"test servers need {', '.join(missing)} which are not installed; "
            "install them with: apt-get install -y redis-server mariadb-server"
        )


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"<no {path.name}>"
    return "\n".join(text.splitlines()[-lines:])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _process_uses_dir(pid: int, root: Path) -> bool:
    """True if `pid` is one of our servers for `root` (named in its argv, or running inside it)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        cmdline = ""
    if str(root) in cmdline:
        return True
    try:  # redis-server rewrites its argv to "redis-server 127.0.0.1:PORT", but it chdirs into --dir
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    return cwd == str(root) or cwd.startswith(f"{root}/") or cwd.startswith(f"{root} ")


def reap_orphans() -> list[int]:
    """SIGKILL servers left by harness runs whose pytest process died without cleaning up; return their PIDs.

    Only a PID recorded in one of our own temp dirs, whose argv or cwd points into that dir, is touched,
    and only when the process that created the dir is gone: concurrent runs and system servers are safe.
    Called automatically by the first start() in a process.
    """
    killed: list[int] = []
    for owner_file in Path(tempfile.gettempdir()).glob(f"{DIR_PREFIX}*/{_OWNER_FILE}"):
        root = owner_file.parent
        try:
            info = json.loads(owner_file.read_text())
            owner_pid = int(info["owner_pid"])
            server_pid = info.get("server_pid")
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if owner_pid == os.getpid() or _pid_alive(owner_pid):
            continue
        if isinstance(server_pid, int) and _pid_alive(server_pid) and _process_uses_dir(server_pid, root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(server_pid, signal.SIGKILL)
            killed.append(server_pid)
        shutil.rmtree(root, ignore_errors=True)
    return killed


class _ChildServer:
    """Lifecycle shared by both servers: temp dir, fixed port, child process, PID-based stop, atexit."""

    kind: ClassVar[str] = "server"
    stop_timeout: ClassVar[float] = 10.0
    start_timeout: float = 10.0  # per class; an instance may override it

    _live: ClassVar[set[_ChildServer]] = set()
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()
    _reaped: ClassVar[bool] = False

    def __init__(self, port: int | None = None, start_timeout: float | None = None) -> None:
        if port is not None and port in SYSTEM_PORTS:
            raise ValueError(f"refusing to run a test {self.kind} on system port {port}")
        self._fixed_port = port is not None
        self._port: int | None = port
        self._proc: subprocess.Popen[bytes] | None = None
        self._stdout: IO[bytes] | None = None
        self._tmpdir: Path | None = None
        self.start_timeout = start_timeout if start_timeout is not None else type(self).start_timeout
        #: Seconds the last successful start() took (spawn until the server answers).
        self.last_start_seconds: float | None = None

    # -- public surface ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"{self.kind} test server has not been started yet")
        return self._port

    @property
    def pid(self) -> int | None:
        """PID of the running child, or None when it is not running."""
        if self._proc is None or self._proc.poll() is not None:
            return None
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def tmpdir(self) -> Path:
        if self._tmpdir is None:
            self._tmpdir = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{self.kind}-"))
            self._write_owner_file()
        return self._tmpdir

    def start(self) -> None:
        """Start the child (on the same port as before, if it ran already) and wait until it answers."""
        if self.running:
            return
        self._reap_once()
        self._register()
        attempts = 1 if (self._fixed_port or self._port is not None) else 3
        for attempt in range(attempts):
            if self._port is None:
                self._port = free_port()
            try:
                self._start_once()
                return
            except ServerStartError as exc:
                # A fresh port can be grabbed by someone else between free_port() and the bind.
                if attempt + 1 < attempts and "in use" in str(exc):
                    self._port = None
                    continue
                raise

    def stop(self) -> None:
        """SIGTERM the child by PID, wait up to stop_timeout seconds, then SIGKILL."""
        proc = self._proc
        if proc is None:
            return
        children.stop_group(proc, self.stop_timeout, term_group=False)
        self._forget_process()

    def kill(self) -> None:
        """SIGKILL the child by PID (simulates a crash) and reap it."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            children.kill_group(proc)
        self._forget_process()

    def restart(self) -> None:
        """stop() then start() on the SAME port, so clients holding the URL reconnect."""
        self.stop()
        self.start()

    def cleanup(self) -> None:
        """stop() and remove the temp dir; the object may be start()ed again afterwards (fresh state)."""
        try:
            self.stop()
        finally:
            if self._tmpdir is not None:
                shutil.rmtree(self._tmpdir, ignore_errors=True)
                self._tmpdir = None
            self._unregister()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} port={self._port} pid={self.pid} dir={self._tmpdir}>"

    # -- hooks for subclasses ---------------------------------------------------------------------

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _prepare(self) -> None:
        """Runs before every spawn (e.g. one-off datadir initialisation)."""

    def _ready(self) -> bool:
        raise NotImplementedError

    def _after_ready(self) -> None:
        """Runs once the server answers, on every start."""

    def _log_path(self) -> Path:
        raise NotImplementedError

    # -- internals --------------------------------------------------------------------------------

    def _start_once(self) -> None:
        self._prepare()
        out_path = self.tmpdir / f"{self.kind}.stdout"
        self._stdout = out_path.open("ab")
        began = time.monotonic()
        # A session of its own: Ctrl-C in the terminal must not kill it before we clean up. Not tied to the
        # spawning thread's life (restart() may run in an executor thread); reap_orphans() covers a crash.
        self._proc = children.spawn(
            self._command(), cwd=self.tmpdir, stdout=self._stdout, die_with_parent=False
        )
        self._write_owner_file()
        deadline = began + self.start_timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._forget_process()
                raise ServerStartError(self._failure(f"exited with code {code} during start-up"))
            if self._ready():
                break
            if time.monotonic() > deadline:
                self.kill()
                raise ServerStartError(self._failure(f"did not answer within {self.start_timeout:.0f} s"))
            time.sleep(0.05)
        try:
            self._after_ready()
        except Exception as exc:
            self.kill()
            raise ServerStartError(self._failure(f"post-start setup failed: {exc}")) from exc
        self.last_start_seconds = time.monotonic() - began

    def _failure(self, what: str) -> str:
        parts = [f"test {self.kind} on 127.0.0.1:{self._port} {what}.", f"--- {self._log_path()} (tail) ---"]
        parts.append(_tail(self._log_path()))
        out = self.tmpdir / f"{self.kind}.stdout"
        if out.exists() and out.stat().st_size:
            parts += [f"--- {out} (tail) ---", _tail(out)]
        text = "\n".join(parts)
        if "Address already in use" in text or "Do you already have another" in text:
            text += "\n(port in use)"
        return text

    def _forget_process(self) -> None:
        self._proc = None
        if self._stdout is not None:
            self._stdout.close()
            self._stdout = None
        self._write_owner_file()

    def _write_owner_file(self) -> None:
        if self._tmpdir is None:
            return
        info = {"owner_pid": os.getpid(), "server_pid": self.pid, "kind": self.kind}
        with contextlib.suppress(OSError):
            (self._tmpdir / _OWNER_FILE).write_text(json.dumps(info))

    def _register(self) -> None:
        with self._registry_lock:
            _ChildServer._live.add(self)

    def _unregister(self) -> None:
        with self._registry_lock:
            _ChildServer._live.discard(self)

    @classmethod
    def _reap_once(cls) -> None:
        with cls._registry_lock:
            if _ChildServer._reaped:
                return
            _ChildServer._reaped = True
        reap_orphans()

    @classmethod
    def _cleanup_all(cls) -> None:
        with cls._registry_lock:
            servers = list(_ChildServer._live)
        for server in servers:
            with contextlib.suppress(Exception):
                server.cleanup()


atexit.register(_ChildServer._cleanup_all)
