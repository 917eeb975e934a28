"""arq worker for the failed channel: `python -m workers.dead_letter`.

Each message names a dead letter (→ alert), a callback (→ HTTP) or a report delivery (→ a destination)
committed in MySQL, where the outcome goes.
"""

from __future__ import annotations

from typing import Any

from arq import Retry
from arq.worker import func

from app.callbacks import service as callbacks
from app.core.config import get_settings
from app.core.redis_pool import deserialize, redis_settings, serialize
from app.dead_letters import dispatch
from app.destinations import delivery, digests
from app.dispatch.queue import DELIVER_CALLBACK, DELIVER_DIGEST, DELIVER_REPORT, HANDLE_DEAD_LETTER
from workers.common import on_shutdown, on_startup, run_worker

ARQ_MAX_TRIES = 1_000_000


async def handle_dead_letter(ctx: dict[str, Any], letter_id: str) -> str:
    # The message only wakes the dispatcher: it sends every pending letter, this one included.
    outcome = await dispatch.dispatch_alerts()
    if outcome.retry_in_s is not None:
        raise Retry(defer=outcome.retry_in_s)
    return outcome.detail


async def deliver_callback(ctx: dict[str, Any], delivery_id: str) -> str:
    outcome = await callbacks.deliver(delivery_id)
    if outcome.retry_in_s is not None:
        raise Retry(defer=outcome.retry_in_s)
    return outcome.detail


async def deliver_report(ctx: dict[str, Any], delivery_id: str) -> str:
    outcome = await delivery.deliver(delivery_id)
    if outcome.retry_in_s is not None:
        raise Retry(defer=outcome.retry_in_s)
    return outcome.detail


async def deliver_digest(ctx: dict[str, Any], digest_id: str) -> str:
    outcome = await digests.deliver_digest(digest_id)
    if outcome.retry_in_s is not None:
        raise Retry(defer=outcome.retry_in_s)
    return outcome.detail


def worker_options() -> dict[str, Any]:
    """Keyword arguments for `OrchestratorWorker`, from the current settings (tests build workers from it)."""
    settings = get_settings()
    return {
        "functions": [
            func(handle_dead_letter, name=HANDLE_DEAD_LETTER, max_tries=ARQ_MAX_TRIES),
            func(deliver_callback, name=DELIVER_CALLBACK, max_tries=ARQ_MAX_TRIES),
            func(deliver_report, name=DELIVER_REPORT, max_tries=ARQ_MAX_TRIES),
            func(deliver_digest, name=DELIVER_DIGEST, max_tries=ARQ_MAX_TRIES),
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
        "on_startup": on_startup,
        "on_shutdown": on_shutdown,
    }


def main() -> None:
    run_worker("dead-letter", "dead_letter", worker_options)


if __name__ == "__main__":
    main()
