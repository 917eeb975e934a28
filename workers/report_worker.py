"""arq worker for the main queue: `arq workers.report_worker.WorkerSettings`.

A thin shell around `app.runner.run_job`; our runner, not arq, decides retries, timeouts and dead letters.
"""

from __future__ import annotations

import logging
from typing import Any

from arq import Retry
from arq.worker import func
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from app.config import get_settings
from app.queue import RUN_REPORT, deserialize, redis_settings, serialize
from app.runner import run_job
from workers.common import (
    arq_job_timeout_s,
    load_registry,
    make_arq_resilient,
    on_shutdown,
    on_startup,
)

# arq must never give up on its own: MySQL holds the real attempt budget.
ARQ_MAX_TRIES = 1_000_000

log = logging.getLogger(__name__)


# While MySQL is unreachable a delivery is retried this often instead of failing in arq.
DB_DOWN_RETRY_S = 1.0


async def run_report(ctx: dict[str, Any], job_id: str) -> str:
    try:
        result = await run_job(job_id, ctx["worker_name"])
    except (OperationalError, InterfaceError, PoolTimeoutError, OSError) as exc:
        log.warning(
            "database unavailable; delivery retried", extra={"job_id": job_id, "error": type(exc).__name__}
        )
        raise Retry(defer=DB_DOWN_RETRY_S) from exc
    if result.defer_s is not None:
        raise Retry(defer=max(result.defer_s, 0.0))
    return result.detail


async def startup(ctx: dict[str, Any]) -> None:
    await on_startup(ctx, "worker")


def worker_options() -> dict[str, Any]:
    """Keyword arguments for `arq.Worker`, from the current settings (tests build workers from it too)."""
    load_registry()
    settings = get_settings()
    return {
        "functions": [func(run_report, name=RUN_REPORT, max_tries=ARQ_MAX_TRIES)],
        "redis_settings": redis_settings(settings),
        "queue_name": settings.queue_name,
        "max_jobs": settings.worker_max_jobs,
        "poll_delay": settings.worker_poll_delay_s,
        "job_timeout": arq_job_timeout_s(),
        "keep_result": 0,
        "job_serializer": serialize,
        "job_deserializer": deserialize,
        "max_tries": ARQ_MAX_TRIES,
        "on_startup": startup,
        "on_shutdown": on_shutdown,
        "health_check_interval": 10,
        # SIGTERM: stop taking jobs, let running attempts finish for this long, then hand the rest back.
        "job_completion_wait": int(settings.worker_shutdown_grace_s),
    }


make_arq_resilient()
WorkerSettings = type("WorkerSettings", (), worker_options())
