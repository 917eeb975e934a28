"""A private redis-server child for tests and benchmarks: no persistence, a free port, FLUSHALL, restart."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import ClassVar

from devtools.servers.base import _ChildServer, _redis_binaries, ensure_binaries


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
