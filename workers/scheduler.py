"""Scheduler process: `python -m workers.scheduler` (APScheduler, AsyncIOScheduler).

Every SCAN_INTERVAL_S it re-enqueues jobs MySQL says are due but Redis does not hold.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from app.core import queue
from app.core.config import get_settings
from app.core.db import dispose_engine
from app.core.logs import setup_logging
from app.maintenance import service as maintenance

log = logging.getLogger("workers.scheduler")


async def tick() -> None:
    try:
        report = await maintenance.run_tick()
        log.info("scheduler tick", extra=report)
    except Exception:
        log.exception("scheduler tick failed; will try again next interval")


async def main() -> None:
    setup_logging("scheduler")
    settings = get_settings()
    scheduler = AsyncIOScheduler()
    # The first tick runs right away below; the interval job takes over after one interval.
    scheduler.add_job(tick, "interval", seconds=settings.scan_interval_s, max_instances=1, coalesce=True)
    scheduler.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("scheduler started", extra={"scan_interval_s": settings.scan_interval_s})
    await tick()
    await stop.wait()
    scheduler.shutdown(wait=False)
    await queue.close_pool()
    await dispose_engine()


if __name__ == "__main__":
    asyncio.run(main())
