"""Start-up and shutdown shared by the arq worker processes.

Loads settings, logging and the report registry; shares arq's Redis pool with `app.queue`.
"""

from __future__ import annotations

import os
import socket
from typing import Any

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
    ctx["worker_name"] = worker_name()
    queue._pool = ctx["redis"]


async def on_shutdown(ctx: dict[str, Any]) -> None:
    queue._pool = None
    await dispose_engine()
