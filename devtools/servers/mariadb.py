"""A private mariadbd child for tests and benchmarks: its own datadir, a free port, restart and crash."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import ClassVar

from devtools.servers.base import (
    ServerStartError,
    _ChildServer,
    _mariadb_binaries,
    _tail,
    ensure_binaries,
)


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
