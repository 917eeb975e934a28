"""Private, throwaway Redis and MariaDB servers for the test-suite and the benchmark (never the system ones
on 6379/3306). Each runs as a child process on a free 127.0.0.1 port in its own temp dir, stopped by PID."""

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

__all__ = [
    "DIR_PREFIX",
    "SYSTEM_PORTS",
    "MariaDBServer",
    "MissingBinariesError",
    "RedisServer",
    "ServerStartError",
    "ensure_binaries",
    "free_port",
    "reap_orphans",
]

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
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self._forget_process()

    def kill(self) -> None:
        """SIGKILL the child by PID (simulates a crash) and reap it."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
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
        self._proc = subprocess.Popen(
            self._command(),
            cwd=self.tmpdir,
            stdin=subprocess.DEVNULL,
            stdout=self._stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in the terminal must not kill it before we clean up
            close_fds=True,
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


class RedisServer(_ChildServer):
    """A redis-server child on 127.0.0.1:PORT, no persistence, logs to <tmpdir>/redis.log."""

    kind: ClassVar[str] = "redis"
    stop_timeout: ClassVar[float] = 10.0
    start_timeout: float = 10.0

    def __init__(self, port: int | None = None, start_timeout: float | None = None) -> None:
        super().__init__(port=port, start_timeout=start_timeout)
        binary = _redis_binaries()["redis-server"]
        if binary is None:
            ensure_binaries(redis=True, mariadb=False)
        self.binary: str = binary or "redis-server"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def flushall(self) -> None:
        """Empty every database of this server."""
        reply = self._command_reply(b"*1\r\n$8\r\nFLUSHALL\r\n")
        if not reply.startswith(b"+OK"):
            raise RuntimeError(f"FLUSHALL on test redis failed: {reply!r}")

    def _log_path(self) -> Path:
        return self.tmpdir / "redis.log"

    def _command(self) -> list[str]:
        d = self.tmpdir
        return [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(d),
            "--logfile", str(d / "redis.log"),
            "--pidfile", str(d / "redis.pid"),
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "no",
            "--protected-mode", "yes",
        ]  # fmt: skip

    def _ready(self) -> bool:
        try:
            return self._command_reply(b"*1\r\n$4\r\nPING\r\n", timeout=0.5).startswith(b"+PONG")
        except OSError:
            return False

    def _command_reply(self, payload: bytes, timeout: float = 5.0) -> bytes:
        # Raw RESP keeps the harness free of client state (no pools that outlive a restart).
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            sock.sendall(payload)
            data = b""
            while not data.endswith(b"\r\n"):
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
            return data


class MariaDBServer(_ChildServer):
    """A mariadbd child with a fresh datadir, database `reports`, root without password over TCP."""

    kind: ClassVar[str] = "mariadb"
    stop_timeout: ClassVar[float] = 30.0
    start_timeout: float = 30.0

    #: InnoDB sizing shared by mariadb-install-db and mariadbd (file sizes must agree between the two).
    INNODB_OPTIONS: ClassVar[tuple[str, ...]] = (
        "--innodb-buffer-pool-size=64M",
        "--innodb-log-file-size=16M",
        "--innodb-log-buffer-size=8M",
        "--innodb-data-file-path=ibdata1:10M:autoextend",
        "--innodb-temp-data-file-path=ibtmp1:4M:autoextend",
        "--innodb-flush-log-at-trx-commit=2",
        "--innodb-doublewrite=0",
        "--innodb-buffer-pool-load-at-startup=0",
        "--innodb-buffer-pool-dump-at-shutdown=0",
    )

    def __init__(
        self, port: int | None = None, database: str = "reports", start_timeout: float | None = None
    ) -> None:
        super().__init__(port=port, start_timeout=start_timeout)
        binaries = _mariadb_binaries()
        if None in binaries.values():
            ensure_binaries(redis=False, mariadb=True)
        self.mariadbd: str = binaries["mariadbd"] or "mariadbd"
        self.install_db: str = binaries["mariadb-install-db"] or "mariadb-install-db"
        self.client: str = binaries["mariadb"] or "mariadb"
        self.database = database
        #: Seconds mariadb-install-db took when the datadir was created (None if not yet).
        self.init_seconds: float | None = None

    @property
    def url(self) -> str:
        """SQLAlchemy URL for the app (`mysql+asyncmy`)."""
        return f"mysql+asyncmy://root@127.0.0.1:{self.port}/{self.database}"

    @property
    def datadir(self) -> Path:
        return self.tmpdir / "data"

    @property
    def socket_path(self) -> Path:
        return self.tmpdir / "mysqld.sock"

    def sql(self, statements: str, database: str | None = None, timeout: float = 30.0) -> str:
        """Run SQL with the `mariadb` client over TCP as root; return tab-separated rows (no header)."""
        cmd = [*self._client_base(), "--batch", "--skip-column-names"]
        if database is not None:
            cmd.append(f"--database={database}")
        cmd += ["-e", statements]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"mariadb client failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def _client_base(self) -> list[str]:
        return [
            self.client, "--no-defaults", "--protocol=TCP", "-h127.0.0.1", f"-P{self.port}", "-uroot",
            "--connect-timeout=2",
        ]  # fmt: skip

    def _log_path(self) -> Path:
        return self.tmpdir / "err.log"

    def _prepare(self) -> None:
        if len(str(self.socket_path)) > 100:  # sun_path limit is 108 bytes
            raise ServerStartError(f"socket path too long, use a shorter TMPDIR: {self.socket_path}")
        if (self.datadir / "mysql").is_dir():
            return
        began = time.monotonic()
        log = self.tmpdir / "install-db.log"
        with log.open("wb") as out:
            done = subprocess.run(
                [
                    self.install_db,
                    "--no-defaults",
                    f"--datadir={self.datadir}",
                    "--user=root",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                    "--skip-name-resolve",
                    "--skip-log-bin",
                    *self.INNODB_OPTIONS,
                ],
                cwd=self.tmpdir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=120,
                check=False,
            )
        if done.returncode != 0:
            shutil.rmtree(self.datadir, ignore_errors=True)
            raise ServerStartError(f"mariadb-install-db failed with code {done.returncode}:\n{_tail(log)}")
        self.init_seconds = time.monotonic() - began

    def _command(self) -> list[str]:
        d = self.tmpdir
        return [
            self.mariadbd,
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--socket={self.socket_path}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            "--user=root",
            "--skip-name-resolve",
            "--skip-log-bin",
            f"--pid-file={d / 'mysqld.pid'}",
            f"--log-error={d / 'err.log'}",
            f"--tmpdir={d}",
            *self.INNODB_OPTIONS,
            # What Debian's /etc/mysql config would give us, which --no-defaults drops:
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            "--max-connections=500",
            "--performance-schema=OFF",
            "--loose-feedback=OFF",
        ]

    def _ready(self) -> bool:
        # "Up" = it accepts TCP on our port and answers over its private socket; TCP login is checked
        # in _after_ready, once the root@127.0.0.1 grant is guaranteed to exist.
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                pass
        except OSError:
            return False
        done = subprocess.run(
            [*self._socket_client(), "-e", "SELECT 1"], capture_output=True, timeout=10, check=False
        )
        return done.returncode == 0

    def _after_ready(self) -> None:
        db = self.database.replace("`", "``")
        setup = (
            "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';"
            "GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
            f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;"
        )
        done = subprocess.run(
            [*self._socket_client(), "-e", setup], capture_output=True, text=True, timeout=30, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"setup SQL failed: {done.stderr.strip()}")
        if self.sql("SELECT 1").strip() != "1":  # the TCP path the app will use
            raise RuntimeError("SELECT 1 over TCP returned something unexpected")

    def _socket_client(self) -> list[str]:
        return [self.client, "--no-defaults", f"--socket={self.socket_path}", "-uroot", "--batch"]
