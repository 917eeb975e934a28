"""The test harness's private MariaDB, sized for a benchmark and fsyncing at commit like a stock server.

Redis is the harness's RedisServer unchanged; both run on free ports, never 3306/6379.
"""

from __future__ import annotations

from typing import ClassVar

from devtools.servers import MariaDBServer


class BenchMariaDB(MariaDBServer):
    """MariaDBServer with a 256 MB buffer pool, 96 MB redo log and innodb_flush_log_at_trx_commit chosen."""

    INNODB_OPTIONS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, flush_at_commit: str = "1") -> None:
        super().__init__()
        self.INNODB_OPTIONS = (  # type: ignore[misc]
            "--innodb-buffer-pool-size=256M",
            "--innodb-log-file-size=96M",
            "--innodb-log-buffer-size=16M",
            "--innodb-data-file-path=ibdata1:10M:autoextend",
            "--innodb-temp-data-file-path=ibtmp1:4M:autoextend",
            f"--innodb-flush-log-at-trx-commit={flush_at_commit}",
            "--innodb-buffer-pool-load-at-startup=0",
            "--innodb-buffer-pool-dump-at-shutdown=0",
        )
