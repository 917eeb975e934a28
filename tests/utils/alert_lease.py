"""Driving the alert dispatcher's lease from a test: slow sink answers, a second consumer that keeps trying,
and another dispatcher taking the lease over in the middle of a send.

The lease is `queue.try_lock("alerts-dispatch")`, a redis-py lock under `ro:lock:alerts-dispatch`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import redis

from app.dead_letters.dispatch import AlertOutcome, dispatch_alerts
from tests.utils.fakes.server import FakeServer

LEASE_KEY = "ro:lock:alerts-dispatch"
OTHER_DISPATCHER = "another-dispatcher"


def answer_slowly(fake: FakeServer, delay_s: float, requests: int) -> None:
    """Delay each of the next `requests` answers of `fake` by `delay_s` (the sink's send takes that long)."""
    for _ in range(requests):
        fake.before_next_answer(lambda: time.sleep(delay_s))


async def dispatch_while(running: asyncio.Task[Any], every_s: float = 0.05) -> list[AlertOutcome]:
    """A second consumer: `dispatch_alerts()` again and again while `running` runs, as a dead-letter consumer
    retries a letter answered "another dispatcher is sending"; its outcomes."""
    outcomes = []
    while not running.done():
        outcomes.append(await dispatch_alerts())
        await asyncio.sleep(every_s)
    return outcomes


def take_lease_over(redis_url: str) -> None:
    """What another dispatcher does once the lease expired: the lock is its own now (blocking, for a fake's
    server thread)."""
    client = redis.Redis.from_url(redis_url)
    try:
        client.set(LEASE_KEY, OTHER_DISPATCHER, ex=60)
    finally:
        client.close()


def lease_holder(redis_url: str) -> str | None:
    client = redis.Redis.from_url(redis_url)
    try:
        value = client.get(LEASE_KEY)
    finally:
        client.close()
    return value.decode() if isinstance(value, bytes) else None
