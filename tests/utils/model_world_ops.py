"""The dispatch model's world: its workers (tests/utils/model_world.py) plus what happens around them: submits
(the real `jobs.service.submit`), the scheduler's tick, FLUSHALL, policy changes and failpoints.

Everything goes through the application's own functions; the model only decides when, and mirrors the policy.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import text

from app.attempts.rescue import declare_lost
from app.core import failpoints, redis_pool
from app.core.db import is_db_outage, session_scope
from app.core.times import utcnow
from app.fairshare import service as fairshare
from app.jobs import service as jobs
from app.maintenance import service as maintenance
from app.models import ReportJob
from tests.utils.model_world import (
    CAPPED,
    DEATH_SETTLE_S,
    DECLARED_CAP,
    SETTLE_S,
    TENANTS,
    WorkerDeath,
    Workers,
)
from tests.utils.settings import reset_process_state
from tests.utils.stack import TABLES

STUCK_S = 0.05  # the model's STUCK_AFTER_S: what its stuck scan and slot sweep are given
WORKERS = 3
# The failpoints the model arms, and what it may make happen at each. An outage or a deadlock is raised only
# where a statement runs; after a commit only a process death is realistic.
FAULTS: dict[str, tuple[str, ...]] = {
    "group_start.before_commit": ("outage", "deadlock", "death"),
    "group_start.after_commit": ("death",),
    "group_success.before_commit": ("outage", "deadlock", "death"),
    "submit.after_commit": ("outage", "death"),
    "finish.before_record": ("outage", "death"),
}
FAULT_CHOICES = [(point, kind) for point, kinds in FAULTS.items() for kind in kinds]

# Settings every model run uses: retries due at once, reconciliation's grace tiny, and a STUCK_AFTER_S so
# large that no heartbeat loop starts on its own (the model beats for the runners that are alive).
MODEL_ENV = {
    "RETRY_DELAYS_S": "[0, 0, 0]",
    "STUCK_AFTER_S": "400",
    "SCAN_INTERVAL_S": "0.01",
    "LOG_LEVEL": "CRITICAL",
}


@dataclass
class Policy:
    """The model's mirror of what MySQL holds: caps, weights and pauses."""

    type_cap: int = DECLARED_CAP  # model.capped's cap; model.plain has none
    tenant_caps: dict[str, int] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TENANTS, 1))
    paused_tenants: set[str] = field(default_factory=set)
    paused_types: set[str] = field(default_factory=set)

    def cap_of(self, report_type: str) -> int | None:
        return self.type_cap if report_type == CAPPED else None


@dataclass
class Submitted:
    """When a submit began and when it was answered, on the model's clock (ordering: happened-before)."""

    began: int
    answered: int
    tenant: str
    ordering_key: str | None


@dataclass
class SlowSubmit:
    task: asyncio.Task[Any]
    gate: asyncio.Event
    began: int
    job_id: str


class World(Workers):
    def __init__(self) -> None:
        super().__init__()
        self.policy = Policy()
        self.clock = 0
        self.submitted: dict[str, Submitted] = {}
        self.slow: list[SlowSubmit] = []
        self.taken: list[str] = []  # live runners a heartbeat told the attempt was no longer theirs
        self._insert_gate: tuple[asyncio.Event, list[str]] | None = None

    async def reset(self) -> None:
        """A clean database and Redis, fresh process state, the model's workers."""
        await reset_process_state()
        failpoints.disarm()
        async with session_scope() as session:
            for table in TABLES:
                await session.execute(text(f"DELETE FROM {table}"))
        await (await redis_pool.get_pool()).flushall()
        for _ in range(WORKERS):
            await self.add_worker()

    async def close(self) -> None:
        failpoints.disarm()
        for slow in self.slow:
            slow.gate.set()
            slow.task.cancel()
        await super().close()

    def tick_clock(self) -> int:
        self.clock += 1
        return self.clock

    # ---- submits --------------------------------------------------------------------------------------

    async def submit(
        self, tenant: str, report_type: str, key: str | None, later_s: float | None, max_attempts: int | None
    ) -> None:
        run_at = utcnow() + timedelta(seconds=later_s) if later_s else None
        request = jobs.SubmitRequest(report_type, {"n": self.clock}, run_at, max_attempts, key)
        began = self.tick_clock()
        await self._api(jobs.submit(tenant, request))
        await self._note_submits(began)

    async def submit_many(self, tenant: str, count: int, report_type: str) -> None:
        """Concurrent plain submits (one group-committed INSERT and enqueue, as concurrent requests get)."""
        began = self.tick_clock()
        request = jobs.SubmitRequest(report_type, {"n": self.clock})
        await self._api(asyncio.gather(*(jobs.submit(tenant, request) for _ in range(count))))
        await self._note_submits(began)

    async def begin_slow_submit(self, tenant: str, key: str, report_type: str) -> None:
        """An ordered submit whose INSERT is slow: its row (created_at, id) is made, its commit waits."""
        gate, seen = asyncio.Event(), []
        self._insert_gate = (gate, seen)
        began = self.tick_clock()
        request = jobs.SubmitRequest(report_type, {"n": began}, None, None, key)
        task = asyncio.ensure_future(jobs.submit(tenant, request))
        deadline = time.monotonic() + SETTLE_S
        while not seen:
            assert not task.done(), f"the slow submit ended before its insert: {task}"
            assert time.monotonic() < deadline, "the slow submit never reached its insert"
            await asyncio.sleep(0.001)
        self.slow.append(SlowSubmit(task, gate, began, seen[0]))

    async def end_slow_submit(self, index: int) -> None:
        slow = self.slow.pop(index % len(self.slow))
        slow.gate.set()
        await self._api(slow.task)
        await self._note_submits(slow.began)

    async def insert_ordered_gate(self, job: ReportJob) -> None:
        """Called by the patched `jobs.service._insert_ordered` before the insert (see conftest)."""
        if self._insert_gate is not None:
            gate, seen = self._insert_gate
            self._insert_gate = None
            seen.append(job.id)
            await gate.wait()

    async def _api(self, call: Awaitable[Any]) -> Any:
        """An API request: its answer, or None when an outage or a death (the API process) ended it."""
        deaths = self.deaths
        task = asyncio.ensure_future(call)
        deadline = time.monotonic() + SETTLE_S
        while not task.done():
            if self.deaths > deaths:
                await asyncio.sleep(DEATH_SETTLE_S)
                task.cancel()
                break
            assert time.monotonic() < deadline, "a submit hangs"
            await asyncio.sleep(0.002)
        try:
            return await task
        except (asyncio.CancelledError, WorkerDeath):
            return None
        except Exception as exc:
            if is_db_outage(exc) or isinstance(exc, failpoints.FailpointOutage):
                return None
            raise

    async def _note_submits(self, began: int) -> None:
        """Record the jobs committed since (answered, or committed although their request failed)."""
        answered = self.tick_clock()
        async with session_scope() as session:
            rows = await session.execute(text("SELECT id, tenant, ordering_key FROM report_jobs"))
            for job_id, tenant, key in rows:
                if job_id not in self.submitted and all(s.job_id != job_id for s in self.slow):
                    self.submitted[job_id] = Submitted(began, answered, tenant, key)

    # ---- the scheduler ----------------------------------------------------------------------------------

    async def stuck_scan(self) -> None:
        """Time passes (STUCK_S), the live runners beat, then the scan declares the silent ones lost. Its
        threshold counts the beats' own duration: a live runner that beat first is not silent yet."""
        await asyncio.sleep(STUCK_S)
        began = time.monotonic()
        self.taken += await self.heartbeat()
        await declare_lost(time.monotonic() - began + STUCK_S / 2)

    async def tick(self) -> None:
        """What `run_tick` does for dispatch, with the model's STUCK_S. A live worker starts what it claimed
        within milliseconds, never STUCK_AFTER_S later: its parked claims start first."""
        await self.start(self.parked())
        await self.stuck_scan()
        await fairshare.publish_policy()
        await fairshare.sweep_slots(STUCK_S)
        await maintenance.reconcile()

    async def flush(self) -> None:
        await (await redis_pool.get_pool()).flushall()
        self.flush_epoch += 1

    # ---- policy -----------------------------------------------------------------------------------------

    async def _policy(self, change: Callable[[], Awaitable[Any]]) -> None:
        await change()
        self.policy_epoch += 1

    async def pause_tenant(self, tenant: str, paused: bool) -> None:
        await self._policy(lambda: fairshare.set_tenant(tenant, {"paused": paused}))
        (self.policy.paused_tenants.add if paused else self.policy.paused_tenants.discard)(tenant)

    async def pause_type(self, report_type: str, paused: bool) -> None:
        await self._policy(lambda: fairshare.set_type(report_type, {"paused": paused}))
        (self.policy.paused_types.add if paused else self.policy.paused_types.discard)(report_type)

    async def set_type_cap(self, cap: int | None) -> None:
        await self._policy(lambda: fairshare.set_type(CAPPED, {"max_concurrency": cap}))
        self.policy.type_cap = DECLARED_CAP if cap is None else cap

    async def set_tenant_cap(self, tenant: str, cap: int | None) -> None:
        await self._policy(lambda: fairshare.set_tenant(tenant, {"max_running": cap}))
        if cap is None:
            self.policy.tenant_caps.pop(tenant, None)
        else:
            self.policy.tenant_caps[tenant] = cap

    async def set_weight(self, tenant: str, weight: int) -> None:
        await self._policy(lambda: fairshare.set_tenant(tenant, {"weight": weight}))
        self.policy.weights[tenant] = weight

    # ---- failpoints -------------------------------------------------------------------------------------

    def arm(self, point: str, kind: str, nth: int) -> None:
        """At the `nth` hit of `point` from now: an outage, a deadlock, or the death of the process there."""
        hits = 0

        async def action() -> None:
            nonlocal hits
            hits += 1
            if hits < nth:
                return
            failpoints.disarm(point)
            if kind == "outage":
                raise failpoints.FailpointOutage(f"model outage at {point}")
            if kind == "deadlock":
                raise failpoints.deadlock(point)
            self.deaths += 1
            raise WorkerDeath(point)

        failpoints.arm(point, action)
