"""OrchestratorWorker: arq's Worker, woken at once by Redis pub/sub, a deferred-job timer and freed slots.

It extends arq through the methods arq itself calls and rides out Redis outages; arq is never patched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import Any

from arq.utils import timestamp_ms
from arq.worker import Worker
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from app.core.db import is_db_outage
from app.core.grouping import GroupCommit
from app.dispatch import claiming, lanes, queue, running
from app.fairshare.service import rebuild_dispatch
from app.fleet.schemas import ProcessKind
from app.fleet.service import Presence

log = logging.getLogger(__name__)

# What a lost or restarting Redis raises; the worker backs off on these instead of ending.
REDIS_DOWN = (RedisError, OSError, TimeoutError)


class OrchestratorWorker(Worker):
    """Runs a poll as soon as there is something to take, instead of only every poll delay.

    Three triggers besides arq's own polling (kept as the fallback): a message on WAKE_CHANNEL (a job was
    enqueued), a timer armed for the earliest deferred job (a retry's backoff or a `run_at` ends) and a job
    ending (its slot is free). Everything the wake-ups need lives on the instance; their tasks start with
    the first poll, so every way of running a worker (`run`, `async_run`, `main`) gets them; `close` ends
    them. The worker-registry heartbeat (`presence`, for the `python -m` processes) starts and ends likewise.

    Methods whose names start with `_` override arq's own (tests/unit/workers/test_worker_seams.py checks
    arq still has them); the public `*_waking`/`poll_now`/... ones are ours.
    """

    def __init__(
        self,
        *args: Any,
        registry_kind: ProcessKind | None = None,
        metrics_port: int | None = None,
        dispatch_lanes: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        # The main queue's worker claims from the dispatch lanes (priority, fair share, caps, pauses); the
        # dead-letter consumer's queue has none and is claimed in time order.
        self.dispatch_lanes = dispatch_lanes
        self._queue_claim: AsyncScript | None = None
        # With a `registry_kind` (the `python -m` processes), the worker announces itself in the worker
        # registry at its first poll, beats with its running jobs and leaves in `close`.
        self.presence = (
            Presence(registry_kind, self.max_jobs, metrics_port, self.jobs_running) if registry_kind else None
        )
        self._poll_lock = asyncio.Lock()  # one poll at a time: the main loop and the wake-ups share the slots
        self._wake = asyncio.Event()
        self._wake_timer: asyncio.TimerHandle | None = None
        self._wake_tasks: list[asyncio.Task[None]] = []
        # A non-Redis error in a wake-up poll is raised in the main loop, where arq would have raised it.
        self._wake_error: BaseException | None = None
        self._redis_failures = 0
        self._scripts: lanes.Scripts | None = None
        self._finishes: GroupCommit[claiming.Finish, None] = GroupCommit(self.record_finishes)
        # This process's delivery token: the value of the in-progress keys its claims set, so its finishes
        # never touch a message another worker holds now (it was declared lost, Redis was flushed meanwhile).
        self.delivery_token = uuid.uuid4().hex
        # What a report's delivery needs to hold its slot once started (workers/report_worker.slot_check).
        self.ctx.update(
            delivery_token=self.delivery_token, in_progress_ms=int(self.in_progress_timeout_s * 1000)
        )

    # ---- arq's seams ------------------------------------------------------------------------------------

    async def _poll_iteration(self) -> None:
        """arq's loop lets a Redis error (e.g. WatchError when a connection drops mid-WATCH) end the process;
        here the worker backs off and carries on, so a Redis restart is ridden out instead of fatal."""
        if self._wake_error is not None:
            error, self._wake_error = self._wake_error, None
            raise error
        if self.presence is not None:
            self.presence.start()  # once; beats go on through Redis and MySQL outages
        try:
            self.start_waking()
            await self.poll_now()
            self._redis_failures = 0
        except REDIS_DOWN as exc:
            self._redis_failures += 1
            # min() on the exponent too: the same 0.2, 0.4, ... 5 s, without a huge int after a long outage.
            delay_s = min(5.0, 0.1 * 2 ** min(self._redis_failures, 16))
            log.warning(
                "redis unavailable in the worker loop; retrying",
                extra={"error": repr(exc), "retry_in_s": delay_s},
            )
            await asyncio.sleep(delay_s)

    def _release_sem_dec_counter_on_complete(self) -> None:
        """A job ended and freed its slot: poll again now, so a full queue drains at the worker's own pace
        instead of one batch per poll delay."""
        super()._release_sem_dec_counter_on_complete()
        if self._wake_tasks:
            self._wake.set()

    async def finish_job(
        self,
        job_id: str,
        finish: bool,
        result_data: bytes | None,
        result_timeout_s: float | None,
        keep_result_forever: bool,
        incr_score: int | None,
        keep_in_progress: float | None,
    ) -> None:
        """arq's finish_job, shared with the jobs finishing at the same time: one MULTI/EXEC for them all."""
        done = claiming.Finish(
            job_id, finish, result_data, result_timeout_s, keep_result_forever, incr_score, keep_in_progress
        )
        await self._finishes.submit(done)

    async def finish_failed_job(self, job_id: str, result_data: bytes | None) -> None:
        """arq's end of a message that could not run (expired, unreadable): through the same script, so
        the slot it holds is freed too."""
        done = claiming.Finish(
            job_id, True, result_data, self.keep_result_s, self.keep_result_forever, None, None
        )
        await self._finishes.submit(done)

    async def close(self) -> None:
        # Wake-ups stop first: while arq waits for the running jobs, a closing worker must not start new ones,
        # and the listener must let go of its connection before arq closes the pool.
        await self.stop_waking()
        if self.presence is not None:
            await self.presence.stop()  # a clean stop leaves the registry at once
        await super().close()

    async def record_finishes(self, finishes: list[claiming.Finish]) -> list[None]:
        return await claiming.record_finishes(self.scripts(), self.queue_name, finishes, self.delivery_token)

    def scripts(self) -> lanes.Scripts:
        if self._scripts is None:
            self._scripts = lanes.Scripts(self.pool)
        return self._scripts

    def jobs_running(self) -> int:
        return sum(not task.done() for task in self.tasks.values())

    # ---- wake-ups ---------------------------------------------------------------------------------------

    def start_waking(self) -> None:
        """Start the listener and the wake-up runner once (the first poll calls this; it needs the pool)."""
        if not self._wake_tasks:
            self._wake_tasks = [
                asyncio.create_task(self.listen_for_wakeups()),
                asyncio.create_task(self.run_wakeups()),
            ]

    async def stop_waking(self) -> None:
        tasks, self._wake_tasks = self._wake_tasks, []
        for task in tasks:
            task.cancel()
        if self._wake_timer is not None:
            self._wake_timer.cancel()
            self._wake_timer = None
        await asyncio.gather(*tasks, return_exceptions=True)
        self._wake.clear()

    async def poll_now(self) -> None:
        async with self._poll_lock:
            await self.claim_and_start()

    async def claim_and_start(self) -> None:
        """arq's poll iteration with one script instead of a ZRANGEBYSCORE plus five round trips per job id:
        claim what the free slots can take (the lanes decide which: app.dispatch.lanes) with what each job
        needs to start, start it, reap finished tasks, beat arq's health check."""
        slots = self.max_jobs - self.job_counter
        if self.burst and self.max_burst_jobs >= 0:
            slots = min(slots, self.max_burst_jobs - self._jobs_started())
        next_due_ms: float | None = None
        if self.allow_pick_jobs and slots > 0:
            claimed = await self.claim(slots)
            next_due_ms = claimed.next_due_ms
            if claimed.jobs and log.isEnabledFor(logging.DEBUG):
                log.debug("claimed jobs", extra={"claimed": len(claimed.jobs), "free_slots": slots})
            for job in claimed.jobs:
                await self.sem.acquire()  # never waits: no more were claimed than there are free slots
                self.job_counter += 1
                # Not arq's run_job: the claim read what its first round trip reads (app/dispatch/running.py)
                task = self.loop.create_task(running.run_claimed(self, job))
                task.add_done_callback(lambda _: self._release_sem_dec_counter_on_complete())
                self.tasks[job.job_id] = task
        if self.allow_abort_jobs:
            await self._cancel_aborted_jobs()
        for job_id, task in list(self.tasks.items()):
            if task.done():
                del self.tasks[job_id]
                task.result()  # as arq does: an error in run_job is raised here
        await self.heart_beat()
        if next_due_ms is not None:
            self.arm_wake_timer_at(next_due_ms)

    async def claim(self, slots: int) -> claiming.Claim:
        """Claim up to `slots` messages; after a Redis flush, first rebuild the dispatch state from MySQL
        (the slots of running jobs and the policy), so caps hold through the flush."""
        if not self.dispatch_lanes:
            if self._queue_claim is None:
                self._queue_claim = claiming.queue_claim_script(self.pool)
            return await claiming.claim_in_time_order(
                self._queue_claim,
                self.queue_name,
                timestamp_ms(),
                self.queue_read_limit,
                slots,
                int(self.in_progress_timeout_s * 1000),
                self.allow_abort_jobs,
                self.delivery_token,
            )
        for _ in range(2):
            claimed = await claiming.claim(
                self.scripts(),
                self.queue_name,
                timestamp_ms(),
                slots,
                int(self.in_progress_timeout_s * 1000),
                self.allow_abort_jobs,
                self.delivery_token,
            )
            if not claimed.rebuild:
                return claimed
            try:
                await rebuild_dispatch()
            except Exception as exc:
                if not is_db_outage(exc):
                    raise
                log.warning("dispatch state not rebuilt: database unavailable", extra={"error": repr(exc)})
                break
        return claiming.Claim([], None)

    async def run_wakeups(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self.allow_pick_jobs:
                try:
                    await self.poll_now()
                except REDIS_DOWN:
                    await asyncio.sleep(0.5)  # the main loop reports and backs off
                except Exception as exc:
                    self._wake_error = exc  # the main loop raises it at its next poll
                    return

    async def listen_for_wakeups(self) -> None:
        delay_s = 0.1
        while True:
            pubsub = None
            try:
                pubsub = self.pool.pubsub()
                await pubsub.subscribe(queue.WAKE_CHANNEL)
                delay_s = 0.1
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        self._wake.set()
            except asyncio.CancelledError:
                raise
            except Exception:  # Redis restarting: resubscribe with backoff
                await asyncio.sleep(delay_s)
                delay_s = min(delay_s * 2, 5.0)
            finally:
                if pubsub is not None:
                    # Hand the subscription's connection back; after a Redis restart it is dead anyway.
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()

    def arm_wake_timer_at(self, score_ms: float) -> None:
        """Poll when the earliest deferred job falls due, if that comes before the next regular poll."""
        wait_s = score_ms / 1000 - time.time()
        if 0 < wait_s < self.poll_delay_s:
            if self._wake_timer is not None:
                self._wake_timer.cancel()
            self._wake_timer = asyncio.get_running_loop().call_later(wait_s, self._wake.set)
