"""Test settings: fast defaults for every knob, and forgetting what the process cached from them."""

from __future__ import annotations

# Fast defaults so the whole state machine runs in well under a second per attempt.
BASE_ENV = {
    "ENV": "test",
    "ENABLE_DEMO_REPORTS": "true",
    "RETRY_DELAYS_S": "[0.2, 0.4, 0.6]",
    "JOB_TIMEOUT_S": "5",
    "STUCK_AFTER_S": "3",
    "SCAN_INTERVAL_S": "0.5",
    "WORKER_POLL_DELAY_S": "0.01",
    "API_KEY_CACHE_TTL_S": "0",
    "LOG_JSON": "false",
    "LOG_LEVEL": "WARNING",
    "ALERT_COALESCE_S": "0.2",
    "NOTICE_COALESCE_S": "0.2",
    "ALERT_TIMEOUT_S": "0.5",
    "ALERT_RETRY_MAX_S": "0.5",
    "CALLBACK_SECRET": "cb-test-secret-0123456789",
    "CALLBACK_ALLOWED_HOSTS": "127.0.0.1",
    "CALLBACK_RETRY_DELAYS_S": "[0.1, 0.2, 0.3]",
    "CALLBACK_TIMEOUT_S": "0.5",
}


async def reset_process_state() -> None:
    """Forget cached settings, engine, Redis pool, metrics, the gauges' snapshot and the group committers:
    the next use reads the current environment and counts from zero."""
    from app.attempts import group_commit
    from app.core import redis_pool
    from app.core.config import reset_settings
    from app.core.db import dispose_engine
    from app.core.metrics import reset_metrics
    from app.destinations import slow_routes
    from app.fairshare import service as fairshare
    from app.jobs import group_submit
    from app.maintenance import service as maintenance
    from app.observability.service import forget_snapshot

    await redis_pool.close_pool()
    await dispose_engine()
    reset_settings()
    reset_metrics()
    forget_snapshot()
    group_commit.reset()
    group_submit.reset()
    fairshare.forget_holds()
    maintenance.forget_retention_walk()
    slow_routes.forget()
