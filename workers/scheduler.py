"""Scheduler process: `python -m workers.scheduler` (APScheduler, AsyncIOScheduler).

Every SCAN_INTERVAL_S it re-enqueues jobs MySQL says are due but Redis does not hold; each finished tick is
recorded in its worker-registry row (`last_tick_at`). Beside the tick, a fire loop sleeps until the next
schedule fire (at most FIRE_POLL_S, so new and changed schedules are seen) and fires what is due, and a
flush watch walks every waiting job back into Redis as soon as Redis lost its state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from app.core import failpoints, metrics, redis_pool, tracing
from app.core.config import get_settings
from app.core.db import dispose_engine
from app.core.logs import setup_logging
from app.core.times import utcnow
from app.fleet.service import Presence
from app.maintenance import service as maintenance
from app.maintenance.reconcile import recover_if_flushed
from app.reports.declared import start_watching
from app.schedules import firing
from workers.common import load_registry

log = logging.getLogger("workers.scheduler")

FIRE_POLL_S = 0.5
FLUSH_WATCH_S = 1.0  # how often the scheduler looks whether Redis lost its state (one HGETALL)
FIRE_BACKOFF_MAX_S = 5.0


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


async def fire_loop(stop: asyncio.Event) -> None:
    """Fire due schedules until `stop`; a failure is logged and retried after a growing pause, never fatal.
    Every replica runs it: the row lock and the unique fire key keep one job per fire time."""
    backoff = FIRE_POLL_S
    while not stop.is_set():
        try:
            now = utcnow()
            await firing.fire_due(now)
            upcoming = await firing.earliest_fire()
            # Still due after firing: it failed or lost a race; look again after a poll, not in a busy loop.
            wait = (
                FIRE_POLL_S if upcoming is None or upcoming <= now else (upcoming - utcnow()).total_seconds()
            )
            delay, backoff = min(FIRE_POLL_S, max(0.0, wait)), FIRE_POLL_S
        except Exception:
            log.exception("schedule fire loop failed; retrying", extra={"backoff_s": backoff})
            delay, backoff = backoff, min(backoff * 2, FIRE_BACKOFF_MAX_S)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)


async def flush_watch(stop: asyncio.Event) -> None:
    """Until `stop`: once Redis lost its state (a flush, an empty restart), walk every waiting job back into
    its lane now, not at the next tick; errors (Redis down) are logged and tried again next second."""
    while not stop.is_set():
        try:
            requeued = await recover_if_flushed()
            if requeued is not None:
                log.warning("recovered after Redis lost its state", extra={"requeued": requeued})
        except Exception as exc:
            log.warning("flush watch failed; trying again", extra={"error": repr(exc)[:200]})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), FLUSH_WATCH_S)


async def main() -> None:
    setup_logging("scheduler")
    failpoints.arm_from_environment()  # none unless a test or the soak names some
    tracing.setup_tracing("report-orchestrator-scheduler")
    settings = get_settings()
    load_registry()  # schedule fires take their report type's attempt and timeout defaults
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
    declared = start_watching()  # REPORT_TYPES_FILE's changes (polled, and on SIGHUP)
    fires = asyncio.create_task(fire_loop(stop))
    await tick(presence)
    watch = asyncio.create_task(flush_watch(stop))
    await stop.wait()
    await fires
    await watch
    await declared.stop()
    scheduler.shutdown(wait=False)
    await presence.stop()
    await redis_pool.close_pool()
    await dispose_engine()


if __name__ == "__main__":
    asyncio.run(main())
