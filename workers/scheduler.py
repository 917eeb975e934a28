"""Scheduler process: `python -m workers.scheduler` (APScheduler, AsyncIOScheduler).

Every SCAN_INTERVAL_S it re-enqueues jobs MySQL says are due but Redis does not hold; each finished tick is
recorded in its worker-registry row (`last_tick_at`).
"""

from __future__ import annotations

import asyncio
import logging
import signal

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from app.core import metrics, queue, tracing
from app.core.config import get_settings
from app.core.db import dispose_engine
from app.core.logs import setup_logging
from app.fleet.service import Presence
from app.maintenance import service as maintenance

log = logging.getLogger("workers.scheduler")


async def tick(presence: Presence | None = None) -> None:
    try:
        # One trace per tick groups its statements; a job it re-enqueues gets a span in its own trace.
        with tracing.span("scheduler.tick"):
            report = await maintenance.run_tick()
        log.info("scheduler tick", extra=report)
    except Exception:
        log.exception("scheduler tick failed; will try again next interval")
        return
    # A tick skipped because another replica holds the lease counts too: this scheduler's loop is alive.
    if presence is not None:
        await presence.beat(ticked=True)


async def main() -> None:
    setup_logging("scheduler")
    tracing.setup_tracing("report-orchestrator-scheduler")
    settings = get_settings()
    metrics.serve(settings.metrics_port)
    presence = Presence("scheduler", concurrency=0, metrics_port=settings.metrics_port or None)
    presence.start()
    scheduler = AsyncIOScheduler()
    # The first tick runs right away below; the interval job takes over after one interval.
    scheduler.add_job(
        tick, "interval", args=[presence], seconds=settings.scan_interval_s, max_instances=1, coalesce=True
    )
    scheduler.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("scheduler started", extra={"scan_interval_s": settings.scan_interval_s})
    await tick(presence)
    await stop.wait()
    scheduler.shutdown(wait=False)
    await presence.stop()
    await queue.close_pool()
    await dispose_engine()


if __name__ == "__main__":
    asyncio.run(main())
