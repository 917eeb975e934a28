"""Start-up and shutdown shared by the arq worker processes.

Loads settings, logging and the report registry; shares arq's Redis pool with `app.queue`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
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
    for worker_id, waker in list(_wakers.items()):
        if waker.worker.pool is ctx.get("redis"):
            waker.stop()
            del _wakers[worker_id]
    queue._pool = None
    await dispose_engine()


log = logging.getLogger(__name__)
_original_poll_iteration = Worker._poll_iteration


class Waker:
    """Runs a worker's poll as soon as there is something to take, instead of only every poll delay.

    Two triggers: a message on WAKE_CHANNEL (a job was enqueued for now) and a timer armed for the earliest
    deferred job in the queue (a retry's backoff or a scheduled `run_at` ends). Polling stays as a fallback.
    """

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.lock = asyncio.Lock()  # one poll at a time per worker
        self.event = asyncio.Event()
        self.timer: asyncio.TimerHandle | None = None
        self.tasks = [asyncio.create_task(self._listen()), asyncio.create_task(self._run())]

    async def poll(self) -> None:
        async with self.lock:
            await _original_poll_iteration(self.worker)
        await self._arm_timer()

    async def _run(self) -> None:
        while True:
            await self.event.wait()
            self.event.clear()
            if self.worker.allow_pick_jobs:
                try:
                    await self.poll()
                except (RedisError, OSError, TimeoutError):
                    await asyncio.sleep(0.5)  # the main loop reports and backs off

    async def _listen(self) -> None:
        delay_s = 0.1
        while True:
            try:
                pubsub = self.worker.pool.pubsub()
                await pubsub.subscribe(queue.WAKE_CHANNEL)
                delay_s = 0.1
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        self.event.set()
            except asyncio.CancelledError:
                raise
            except Exception:  # Redis restarting: resubscribe with backoff
                await asyncio.sleep(delay_s)
                delay_s = min(delay_s * 2, 5.0)

    async def _arm_timer(self) -> None:
        earliest = await self.worker.pool.zrange(self.worker.queue_name, 0, 0, withscores=True)
        if not earliest:
            return
        wait_s = earliest[0][1] / 1000 - time.time()
        if 0 < wait_s < self.worker.poll_delay_s:
            if self.timer is not None:
                self.timer.cancel()
            self.timer = asyncio.get_running_loop().call_later(wait_s, self.event.set)

    def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        if self.timer is not None:
            self.timer.cancel()


_wakers: dict[int, Waker] = {}


_original_release = Worker._release_sem_dec_counter_on_complete


def _release_and_poll(self: Worker) -> None:
    """A job ended and freed its slot: poll again now, so a full queue drains at the worker's own pace
    instead of one batch per poll delay."""
    _original_release(self)
    waker = _wakers.get(id(self))
    if waker is not None:
        waker.event.set()


async def _resilient_poll_iteration(self: Worker) -> None:
    """arq's loop lets a Redis error (e.g. WatchError when a connection drops mid-WATCH) end the process;
    here the worker backs off and carries on, so a Redis restart is ridden out instead of fatal."""
    try:
        waker = _wakers.get(id(self))
        if waker is None:
            waker = _wakers[id(self)] = Waker(self)
        await waker.poll()
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
    """Install the resilient, wake-driven poll loop (arq's CLI builds the Worker, so the class is patched)."""
    Worker._poll_iteration = _resilient_poll_iteration  # type: ignore[method-assign]
    Worker._release_sem_dec_counter_on_complete = _release_and_poll  # type: ignore[method-assign]


def restore_plain_arq() -> None:
    """Undo `make_arq_resilient` (the benchmark's raw-arq baseline must run arq as shipped)."""
    Worker._poll_iteration = _original_poll_iteration  # type: ignore[method-assign]
    Worker._release_sem_dec_counter_on_complete = _original_release  # type: ignore[method-assign]
