"""Celery 5 baseline: a no-op task, Redis broker, SQLAlchemy result backend on the private MariaDB.

`celery -A bench.celery_app worker --pool=prefork --concurrency=2`; `python -m bench.celery_app N` enqueues N.
"""

from __future__ import annotations

import os
import sys
import time

from celery import Celery

app = Celery(
    "bench",
    broker=os.environ.get("BENCH_CELERY_BROKER", "redis://127.0.0.1:1/1"),
    backend=os.environ.get("BENCH_CELERY_BACKEND", "db+sqlite:///:memory:"),
)
app.conf.update(broker_connection_retry_on_startup=True)


@app.task(name="bench.noop")
def noop() -> None:
    """Does nothing; Celery stores its SUCCESS row in MySQL."""


def enqueue(count: int) -> float:
    """Publish `count` no-op tasks; return the publish rate (tasks/s)."""
    # Creating the result table here keeps the two prefork children from racing to create it.
    app.backend.ResultSession().close()
    began = time.perf_counter()
    with app.producer_or_acquire() as producer:
        for _ in range(count):
            noop.apply_async(producer=producer)
    return count / (time.perf_counter() - began)


if __name__ == "__main__":
    print(f"{enqueue(int(sys.argv[1])):.1f}")
