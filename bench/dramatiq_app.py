"""Dramatiq baseline: Redis broker, one actor that writes a MySQL status row per job (as Celery's peer does
through its result backend), pymysql with one connection per worker thread, autocommit, fsync at commit.

`dramatiq bench.dramatiq_app --processes 2 --threads 8`; `python -m bench.dramatiq_app N` enqueues N.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any
from urllib.parse import urlparse

import dramatiq
from dramatiq.brokers.redis import RedisBroker

STATUS_TABLE = "dramatiq_status"
QUEUE = "bench"

broker = RedisBroker(url=os.environ.get("BENCH_DRAMATIQ_BROKER", "redis://127.0.0.1:1/2"))
dramatiq.set_broker(broker)
_local = threading.local()


def mysql_target() -> dict[str, Any]:
    """pymysql's connect() arguments from BENCH_DRAMATIQ_MYSQL (mysql://root@127.0.0.1:PORT/db)."""
    url = urlparse(os.environ.get("BENCH_DRAMATIQ_MYSQL", "mysql://root@127.0.0.1:3306/celery_results"))
    return {
        "host": url.hostname or "127.0.0.1",
        "port": url.port or 3306,
        "user": url.username or "root",
        "password": url.password or "",
        "database": url.path.lstrip("/"),
        "autocommit": True,
    }


def connection() -> Any:
    """This worker thread's own MySQL connection (Dramatiq runs actors on threads)."""
    import pymysql

    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = pymysql.connect(**mysql_target())
        _local.conn = conn
    return conn


def create_table() -> None:
    import pymysql

    conn = pymysql.connect(**mysql_target())
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {STATUS_TABLE} (message_id VARCHAR(36) PRIMARY KEY, "
                "status VARCHAR(16) NOT NULL, finished_at DATETIME(6) NOT NULL) ENGINE=InnoDB"
            )
            cur.execute(f"TRUNCATE TABLE {STATUS_TABLE}")
    finally:
        conn.close()


@dramatiq.actor(queue_name=QUEUE, max_retries=0)
def bench_noop(job_id: str) -> None:
    """Does nothing but record its status row in MySQL (one INSERT, autocommit: one commit)."""
    with connection().cursor() as cur:
        cur.execute(
            f"INSERT INTO {STATUS_TABLE} (message_id, status, finished_at) VALUES (%s, 'done', NOW(6))",
            (job_id,),
        )


def enqueue(count: int) -> float:
    """Create the status table (empty), then send `count` messages; return the send rate (messages/s)."""
    create_table()
    began = time.perf_counter()
    for i in range(count):
        bench_noop.send(f"job-{i:08d}")
    return count / (time.perf_counter() - began)


if __name__ == "__main__":
    print(f"{enqueue(int(sys.argv[1])):.1f}")
