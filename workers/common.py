"""Start-up, shutdown and the `python -m` entry shared by the arq worker processes.

Loads settings, logging and the report registry; shares arq's Redis pool with `app.dispatch.queue`.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from typing import Any

from app.core import failpoints, metrics, redis_pool, tracing
from app.core.config import get_settings
from app.core.db import dispose_engine
from app.core.heap import freeze_startup_heap
from app.core.logs import setup_logging
from app.fleet.schemas import ProcessKind
from app.reports.declared import declarations, start_watching
from app.reports.declared.loader import MAX_TIMEOUT_S
from app.reports.registry import registry
from workers.base import OrchestratorWorker


def load_registry() -> None:
    """The Python report types, then REPORT_TYPES_FILE's (a broken file is logged; the Python ones run)."""
    settings = get_settings()
    registry.load(settings.enable_demo_reports, settings.report_modules)
    declarations.load_now()


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def arq_job_timeout_s() -> float:
    """arq's own limit sits above every report's timeout: our wrapper, not arq, decides on timeouts."""
    settings = get_settings()
    timeouts = [t.timeout_s for t in registry.all() if t.timeout_s] + [settings.job_timeout_s]
    if settings.report_types_file is not None:  # a declared type's timeout may grow while the worker runs
        timeouts.append(MAX_TIMEOUT_S)
    return max(timeouts) + 60


async def on_startup(ctx: dict[str, Any]) -> None:
    ctx["worker_name"] = worker_name()
    # Enqueues made while running a job (retries, dead letters, callbacks) go through arq's own pool.
    redis_pool.set_pool(ctx["redis"])
    if declarations.status.file is not None:  # this process loaded REPORT_TYPES_FILE: keep it current
        ctx["declared_watch"] = start_watching()
    freeze_startup_heap()


async def on_shutdown(ctx: dict[str, Any]) -> None:
    watch = ctx.pop("declared_watch", None)
    if watch is not None:
        await watch.stop()
    redis_pool.clear_pool()  # arq closes its pool itself, right after this hook
    await dispose_engine()


def run_worker(process: str, kind: ProcessKind, options: Callable[[], dict[str, Any]]) -> None:
    """What `arq <module>.WorkerSettings` did, with our Worker class and our logging: run until a signal,
    serving metrics on METRICS_PORT (if set) and announced in the worker registry as `kind`.

    Logging comes first so loading the registry and arq's "Starting worker" line already use it.
    """
    setup_logging(process)
    failpoints.arm_from_environment()  # none unless a test or the soak names some
    tracing.setup_tracing(f"report-orchestrator-{process}")  # off unless the OTEL_* environment asks
    port = get_settings().metrics_port
    metrics.serve(port)
    # arq's Worker takes the current event loop when it is built and installs its signal handlers on it.
    asyncio.set_event_loop(asyncio.new_event_loop())
    OrchestratorWorker(**options(), registry_kind=kind, metrics_port=port or None).run()
