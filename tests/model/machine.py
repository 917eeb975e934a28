"""The checker's state machine: hypothesis drives the real dispatch machinery (claim script, group-committed
starts, runner, finishes, stuck scan, reconciliation, fair share) against the suite's MariaDB and Redis.

Rules are the operations (tests/utils/model_world*.py); after every one the invariants of
tests/utils/model_checks.py are checked. tests/model/test_dispatch_model.py runs it, whole and focused.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from app.core import failpoints
from tests.utils import model_checks as checks
from tests.utils.model_world import CAPPED, PERMANENT, RETRY, SUCCESS, TENANTS, TYPES, ModelWorker
from tests.utils.model_world_ops import FAULT_CHOICES, FAULTS, World

T = TypeVar("T")

STEP_TIMEOUT_S = 120.0

tenants = st.sampled_from(TENANTS)
report_types = st.sampled_from(TYPES)
caps = st.sampled_from([None, 1, 2, 3])
index = st.integers(0, 15)


def pick(items: Sequence[T], at: int) -> T:
    return items[at % len(items)]


class Bridge:
    """Runs the model's coroutines on the test's event loop from hypothesis's thread; knows today's world."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.world: World | None = None
        self.stopped = False  # the test ended (a timeout): hypothesis's thread must stop at its next step

    def call(self, coro: Awaitable[T]) -> T:
        if self.stopped:
            if asyncio.iscoroutine(coro):
                coro.close()
            raise BridgeStopped("the test using this bridge has ended")
        return asyncio.run_coroutine_threadsafe(_awaited(coro), self.loop).result(STEP_TIMEOUT_S)


class BridgeStopped(BaseException):
    """Raised in hypothesis's thread once the test is over: a BaseException, so hypothesis does not take it
    for a failure to shrink."""


async def _awaited(coro: Awaitable[T]) -> T:
    return await coro


class DispatchMachine(RuleBasedStateMachine):
    bridge: Bridge  # set by the test before hypothesis builds the first machine

    def __init__(self) -> None:
        super().__init__()
        self.world = World()
        self.bridge.world = self.world
        self.missing = checks.MissingTracker()
        self.fairness = checks.FairnessTracker()
        self.call(self.world.reset())

    def call(self, coro: Any) -> Any:
        self.world.step += 1
        return self.bridge.call(coro)

    def teardown(self) -> None:
        self.call(self.world.close())

    # ---- submits ----------------------------------------------------------------------------------------

    @rule(
        tenant=tenants,
        report_type=report_types,
        key=st.sampled_from([None, "k1", "k2"]),
        later_s=st.sampled_from([None, 0.002, 3600.0]),
        max_attempts=st.sampled_from([None, 1, 2]),
    )
    def submit(
        self, tenant: str, report_type: str, key: str | None, later_s: float | None, max_attempts: int | None
    ) -> None:
        self.call(self.world.submit(tenant, report_type, key, later_s, max_attempts))

    @rule(tenant=tenants, count=st.integers(2, 8), report_type=report_types)
    def submit_many(self, tenant: str, count: int, report_type: str) -> None:
        self.call(self.world.submit_many(tenant, count, report_type))

    @precondition(lambda self: len(self.world.slow) < 2)
    @rule(tenant=tenants, key=st.sampled_from(["k1"]), report_type=report_types)
    def begin_slow_submit(self, tenant: str, key: str, report_type: str) -> None:
        self.call(self.world.begin_slow_submit(tenant, key, report_type))

    @precondition(lambda self: self.world.slow)
    @rule(at=index)
    def end_slow_submit(self, at: int) -> None:
        self.call(self.world.end_slow_submit(at))

    # ---- workers ----------------------------------------------------------------------------------------

    @rule(worker=index, slots=st.integers(1, 3))
    def claim(self, worker: int, slots: int) -> None:
        chosen = pick(self.world.live_workers(), worker)
        if chosen.free_slots() > 0:
            self.call(self._claim(chosen, min(slots, chosen.free_slots())))

    async def _claim(self, worker: ModelWorker, slots: int) -> list[Any]:
        """The worker's claim; a claim of one slot is a sample of fair share (of a longer one, the tenants
        that still had claimable work after its first picks are unknown)."""
        claimable = await checks.claimable_tenants(time.time() * 1000)
        fresh = await self.world.claim(worker, slots)
        if slots == 1:
            served = self.world.submitted.get(fresh[0].job_id) if fresh else None
            self.fairness.record(claimable, served.tenant if served else None, self.world.policy.weights)
        return fresh

    @precondition(lambda self: self.world.parked())
    @rule(picks=st.lists(index, min_size=1, max_size=4))
    def start(self, picks: list[int]) -> None:
        parked = self.world.parked()
        self.call(self.world.start({pick(parked, at) for at in picks}))

    @precondition(lambda self: self.world.runners())
    @rule(at=index, verdict=st.sampled_from([SUCCESS, SUCCESS, RETRY, PERMANENT]))
    def finish(self, at: int, verdict: str) -> None:
        self.call(self.world.finish(pick(self.world.runners(), at), verdict))

    @rule(worker=index, rounds=st.integers(1, 8))
    def run_to_completion(self, worker: int, rounds: int) -> None:
        """A worker claims one message at a time, starts it and lets it succeed: `rounds` times."""
        self.call(self._cycles(worker, rounds))

    async def _cycles(self, worker: int, rounds: int) -> None:
        for _ in range(rounds):
            chosen = pick(self.world.live_workers(), worker)
            if chosen.free_slots() == 0:
                return
            fresh = await self._claim(chosen, 1)
            await self.world.start(fresh)
            for delivery in fresh:
                if delivery.live and delivery in self.world.runners():
                    await self.world.finish(delivery, SUCCESS)

    @rule(worker=index)
    def kill_worker(self, worker: int) -> None:
        self.call(self.world.kill(pick(self.world.live_workers(), worker)))

    # ---- the scheduler, Redis, the policy, failpoints -----------------------------------------------------

    @rule()
    def tick(self) -> None:
        self.call(self.world.tick())
        self.missing.after_tick(self.world, self.call(checks.snapshot()))

    @rule()
    def stuck_scan(self) -> None:
        self.call(self.world.stuck_scan())

    @rule()
    def flush_redis(self) -> None:
        self.call(self.world.flush())

    @rule(name=st.sampled_from([*TENANTS, *TYPES]), paused=st.booleans())
    def pause(self, name: str, paused: bool) -> None:
        """Pause or resume a tenant or a report type."""
        if name in TENANTS:
            self.call(self.world.pause_tenant(name, paused))
        else:
            self.call(self.world.pause_type(name, paused))

    @rule(name=st.sampled_from([*TENANTS, CAPPED]), cap=caps)
    def set_cap(self, name: str, cap: int | None) -> None:
        """A tenant's max_running, or model.capped's max_concurrency (None: back to the default)."""
        if name in TENANTS:
            self.call(self.world.set_tenant_cap(name, cap))
        else:
            self.call(self.world.set_type_cap(cap))

    @rule(tenant=tenants, weight=st.sampled_from([1, 2, 3]))
    def set_weight(self, tenant: str, weight: int) -> None:
        self.call(self.world.set_weight(tenant, weight))
        self.fairness.reset()

    @rule(fault=st.sampled_from(FAULT_CHOICES), nth=st.integers(1, 2))
    def arm_failpoint(self, fault: tuple[str, str], nth: int) -> None:
        self.world.arm(*fault, nth)

    @precondition(lambda self: len(self.world.parked()) > 1)
    @rule(kind=st.sampled_from(FAULTS["group_start.before_commit"]), nth=st.integers(1, 2))
    def start_all_through_fault(self, kind: str, nth: int) -> None:
        """Every parked delivery starts at once (one group commit) with a fault before a commit of it."""
        self.world.arm("group_start.before_commit", kind, nth)
        self.call(self.world.start(self.world.parked()))
        failpoints.disarm("group_start.before_commit")

    # ---- after every step ---------------------------------------------------------------------------------

    @invariant()
    def invariants_hold(self) -> None:
        checks.check_every_step(self.world, self.call(checks.snapshot()))
