"""Private, throwaway Redis and MariaDB servers for the test-suite and the benchmark (never the system ones
on 6379/3306). Each runs as a child process on a free 127.0.0.1 port in its own temp dir, stopped by PID."""

from devtools.servers.base import (
    DIR_PREFIX,
    SYSTEM_PORTS,
    MissingBinariesError,
    ServerStartError,
    ensure_binaries,
    free_port,
    reap_orphans,
)
from devtools.servers.mariadb import MariaDBServer
from devtools.servers.redis import RedisServer

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
