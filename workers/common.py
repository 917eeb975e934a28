"""Start-up and shutdown shared by the arq worker processes.

Loads settings, logging and the report registry; shares arq's Redis pool with `app.queue`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Any

from arq.worker import Worker
from redis.exceptions import RedisError

from app import queue
from app.config import get_settings
from app.db import dispose_engine
from app.logging_setup import setup_logging
from app.reports.registry import registry


def load_registry() -> None:
    settings = get_settings()
    registry.load(settings.enable_demo_reports, settings.report_modules)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def arq_job_timeout_s() -> float:
    """arq's own limit sits above every report's timeout: our wrapper, not arq, decides on timeouts."""
    settings = get_settings()
    timeouts = [t.timeout_s for t in registry.all() if t.timeout_s] + [settings.job_timeout_s]
    return max(timeouts) + 60


async def on_startup(ctx: dict[str, Any], process: str) -> None:
    setup_logging(process)
    # arq's CLI gives the "arq" logger a handler of its own; ours (on the root) already writes its lines.
    logging.getLogger("arq").handlers.clear()
    ctx["worker_name"] = worker_name()
    queue._pool = ctx["redis"]


async def on_shutdown(ctx: dict[str, Any]) -> None:
    queue._pool = None
    await dispose_engine()


log = logging.getLogger(__name__)
_original_poll_iteration = Worker._poll_iteration


async def _resilient_poll_iteration(self: Worker) -> None:
    """arq's loop lets a Redis error (e.g. WatchError when a connection drops mid-WATCH) end the process;
    here the worker backs off and carries on, so a Redis restart is ridden out instead of fatal."""
    try:
        await _original_poll_iteration(self)
        self._redis_failures = 0  # type: ignore[attr-defined]
    except (RedisError, OSError, TimeoutError) as exc:
        failures = getattr(self, "_redis_failures", 0) + 1
        self._redis_failures = failures  # type: ignore[attr-defined]
        delay_s = min(5.0, 0.1 * 2**failures)
        log.warning(
            "redis unavailable in the worker loop; retrying",
            extra={"error": repr(exc), "retry_in_s": delay_s},
        )
        await asyncio.sleep(delay_s)


def make_arq_resilient() -> None:
    """Install the resilient poll loop (arq's CLI builds the Worker itself, so the class is patched)."""
    Worker._poll_iteration = _resilient_poll_iteration  # type: ignore[method-assign]
