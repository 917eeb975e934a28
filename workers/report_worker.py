"""arq worker for the main queue: `python -m workers.report_worker`.

A thin shell around `app.attempts.runner.run_job`: the runner, not arq, decides retries and dead letters.
"""

from __future__ import annotations

import logging
from typing import Any

from arq import Retry
from arq.worker import func

from app.attempts.runner import SlotCheck, run_job
from app.core.config import get_settings
from app.core.db import is_db_outage
from app.core.redis_pool import deserialize, redis_settings, serialize
from app.dispatch.lanes import attempt_code
from app.dispatch.queue import RUN_REPORT
from app.fairshare.service import hold_slot
from workers.common import arq_job_timeout_s, load_registry, on_shutdown, on_startup, run_worker

# arq must never give up on its own: MySQL holds the real attempt budget.
ARQ_MAX_TRIES = 1_000_000

log = logging.getLogger(__name__)


# While MySQL is unreachable a delivery is retried this often instead of failing in arq.
DB_DOWN_RETRY_S = 1.0


async def run_report(ctx: dict[str, Any], job_id: str, traceparent: str | None = None) -> str:
    """`traceparent`: the job's trace context, carried by messages that have it (see `enqueue_run`)."""
    try:
        # Looked up on the module at call time, so tests can swap the runner for this shell's own tests.
        result = await run_job(job_id, ctx["worker_name"], traceparent, slot_check(ctx))
    except Exception as exc:
        # Only an outage is worth waiting out. Anything else (a schema mismatch such as MySQL 1054, a bug)
        # would fail again on every delivery: it fails this arq job instead, and MySQL's stuck scan later
        # declares the attempt lost and retries it within the job's own budget.
        if not is_db_outage(exc):
            raise
        log.warning(
            "database unavailable; delivery retried", extra={"job_id": job_id, "error": type(exc).__name__}
        )
        raise Retry(defer=DB_DOWN_RETRY_S) from exc
    if result.defer_s is not None:
        raise Retry(defer=max(result.defer_s, 0.0))
    return result.detail


def slot_check(ctx: dict[str, Any]) -> SlotCheck | None:
    """After the start: the job's slot and this delivery held (a flush may take them after the claim)."""
    token = ctx.get("delivery_token")
    if token is None:  # not an OrchestratorWorker's delivery (a test's plain arq worker): nothing to hold
        return None
    arq_id, lease_ms = ctx["job_id"], ctx["in_progress_ms"]
    return lambda job, key: hold_slot(job, arq_id, token, lease_ms, attempt_code(key.replay, key.attempt))


def worker_options() -> dict[str, Any]:
    """Keyword arguments for `OrchestratorWorker`, from the current settings (tests build workers from it)."""
    load_registry()
    settings = get_settings()
    return {
        "functions": [func(run_report, name=RUN_REPORT, max_tries=ARQ_MAX_TRIES)],
        "dispatch_lanes": True,
        "redis_settings": redis_settings(settings),
        "queue_name": settings.queue_name,
        "max_jobs": settings.worker_max_jobs,
        "poll_delay": settings.worker_poll_delay_s,
        "job_timeout": arq_job_timeout_s(),
        "keep_result": 0,
        "job_serializer": serialize,
        "job_deserializer": deserialize,
        "max_tries": ARQ_MAX_TRIES,
        "on_startup": on_startup,
        "on_shutdown": on_shutdown,
        "health_check_interval": 10,
        # SIGTERM: stop taking jobs, let running attempts finish for this long, then hand the rest back.
        "job_completion_wait": int(settings.worker_shutdown_grace_s),
    }


def main() -> None:
    run_worker("worker", "worker", worker_options)


if __name__ == "__main__":
    main()
