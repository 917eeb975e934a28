"""arq worker for the failed channel: `arq workers.dead_letter.WorkerSettings`.

Each message names a dead letter (→ alert) or a completion callback (→ HTTP delivery) already committed
in MySQL; the consumer delivers it and records the outcome there.
"""

from __future__ import annotations

from typing import Any

from arq import Retry
from arq.worker import func

from app import callbacks, dead_letters
from app.config import get_settings
from app.queue import DELIVER_CALLBACK, HANDLE_DEAD_LETTER, deserialize, redis_settings, serialize
from workers.common import make_arq_resilient, on_shutdown, on_startup

ARQ_MAX_TRIES = 1_000_000


async def handle_dead_letter(ctx: dict[str, Any], letter_id: str) -> str:
    # The message only wakes the dispatcher: it sends every pending letter, this one included.
    outcome = await dead_letters.dispatch_alerts()
    if outcome.retry_in_s is not None:
        raise Retry(defer=outcome.retry_in_s)
    return outcome.detail


async def deliver_callback(ctx: dict[str, Any], delivery_id: str) -> str:
    outcome = await callbacks.deliver(delivery_id)
    if outcome.retry_in_s is not None:
        raise Retry(defer=outcome.retry_in_s)
    return outcome.detail


async def startup(ctx: dict[str, Any]) -> None:
    await on_startup(ctx, "dead-letter")


def worker_options() -> dict[str, Any]:
    settings = get_settings()
    return {
        "functions": [
            func(handle_dead_letter, name=HANDLE_DEAD_LETTER, max_tries=ARQ_MAX_TRIES),
            func(deliver_callback, name=DELIVER_CALLBACK, max_tries=ARQ_MAX_TRIES),
        ],
        "redis_settings": redis_settings(settings),
        "queue_name": settings.dead_letter_queue_name,
        "max_jobs": 20,
        "poll_delay": 0.2,
        "job_timeout": 120,
        "keep_result": 0,
        "job_serializer": serialize,
        "job_deserializer": deserialize,
        "max_tries": ARQ_MAX_TRIES,
        "on_startup": startup,
        "on_shutdown": on_shutdown,
    }


make_arq_resilient()
WorkerSettings = type("WorkerSettings", (), worker_options())
