"""Focused versions of the checker's state machine: the whole machine (tests/model/machine.py) with only the
rules of one family of operations, a few compound rules, and a start state, so each family's faults come up
in a few dozen steps. `PROFILES` is what tests/model/test_dispatch_model.py runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from tests.model.machine import DispatchMachine, index, pick
from tests.utils.model_world import CAPPED, PLAIN, TENANTS


def focused(name: str, keep: set[str], base: type[DispatchMachine]) -> type[DispatchMachine]:
    """`base` with only the rules named in `keep` (the others are switched off; initialize rules stay)."""
    rules = {attr for cls in base.__mro__ for attr, value in vars(cls).items() if _is_rule(value)}
    return type(name, (base,), dict.fromkeys(rules - keep))


def _is_rule(value: object) -> bool:
    return hasattr(value, "hypothesis_stateful_rule")


class FocusedRules(DispatchMachine):
    """Narrower or compound versions of the whole machine's rules."""

    @rule(tenant=st.sampled_from(TENANTS))
    def submit_capped(self, tenant: str) -> None:
        self.call(self.world.submit(tenant, CAPPED, None, None, None))

    @rule()
    def submit_ordered(self) -> None:
        self.call(self.world.submit("a", PLAIN, "k1", None, None))

    @precondition(lambda self: len(self.world.slow) < 2)
    @rule()
    def race_two_ordered_submits(self) -> None:
        """Two requests of one ordering key at once; the first one's insert is slow: the second one is
        answered, the first one stays in flight (until `end_slow_submit`)."""
        self.call(self.world.begin_slow_submit("a", "k1", PLAIN))
        self.call(self.world.submit("a", PLAIN, "k1", None, None))

    @rule(worker=index, slots=st.integers(1, 3), one_by_one=st.sampled_from([None, "in order", "reversed"]))
    def claim_and_start(self, worker: int, slots: int, one_by_one: str | None) -> None:
        """A worker claims and starts at once (as a real one does, within milliseconds): what it claimed
        starts together, or one after the other in claim order or the reverse (its tasks' order is free)."""
        chosen = pick(self.world.live_workers(), worker)
        if chosen.free_slots() == 0:
            return
        fresh = self.call(self._claim(chosen, min(slots, chosen.free_slots())))
        if one_by_one is None:
            self.call(self.world.start(fresh))
            return
        for delivery in reversed(fresh) if one_by_one == "reversed" else fresh:
            self.call(self.world.start([delivery]))

    @rule(tenant=st.sampled_from(TENANTS), worker=index, rounds=st.integers(1, 12))
    def pause_for_a_while(self, tenant: str, worker: int, rounds: int) -> None:
        """An operator pauses a tenant while a worker takes `rounds` jobs one by one, then resumes it."""
        self.call(self.world.pause_tenant(tenant, True))
        self.call(self._cycles(worker, rounds))
        self.call(self.world.pause_tenant(tenant, False))

    @rule(tenant=st.sampled_from(TENANTS), count=st.integers(4, 16))
    def backlog(self, tenant: str, count: int) -> None:
        self.call(self.world.submit_many(tenant, count, PLAIN))

    @rule(worker=index, rounds=st.integers(4, 12))
    def drain(self, worker: int, rounds: int) -> None:
        """`run_to_completion`, longer."""
        self.call(self._cycles(worker, rounds))

    @precondition(lambda self: self.world.runners())
    @rule(at=index)
    def kill_runner(self, at: int) -> None:
        """The worker running some job dies."""
        self.call(self.world.kill(pick(self.world.runners(), at).worker))

    @precondition(lambda self: self.world.runners())
    @rule(at=index)
    def kill_runner_and_rescue(self, at: int) -> None:
        """The worker running some job dies, and the scheduler's next tick rescues the job."""
        self.call(self.world.kill(pick(self.world.runners(), at).worker))
        self.tick()

    @precondition(lambda self: self.world.parked())
    @rule(worker=index, reverse=st.booleans())
    def start_one_by_one(self, worker: int, reverse: bool) -> None:
        """A worker's parked deliveries start one after the other, in claim order or the reverse."""
        parked = self.world.parked()
        owner = pick(parked, worker).worker
        mine = [d for d in parked if d.worker is owner]
        for delivery in reversed(mine) if reverse else mine:
            self.call(self.world.start([delivery]))


class WithBacklogs(FocusedRules):
    """Both tenants start with a backlog (an initialize rule: swarm testing never switches it off)."""

    @initialize(a=st.integers(4, 16), b=st.integers(4, 16))
    def backlogs(self, a: int, b: int) -> None:
        self.call(self.world.submit_many("a", a, PLAIN))
        self.call(self.world.submit_many("b", b, PLAIN))


class WithCappedJobs(FocusedRules):
    @initialize(count=st.integers(1, 2))
    def capped_jobs(self, count: int) -> None:
        self.call(self.world.submit_many("a", count, CAPPED))


class WithMixedJobs(FocusedRules):
    """Plain jobs and jobs of an ordering key to start with."""

    @initialize(plain=st.integers(1, 3), ordered=st.integers(1, 3))
    def mixed_jobs(self, plain: int, ordered: int) -> None:
        self.call(self.world.submit_many("a", plain, PLAIN))
        for _ in range(ordered):
            self.call(self.world.submit("a", PLAIN, "k1", None, None))


@dataclass(frozen=True)
class Profile:
    machine: type[DispatchMachine]
    examples: int  # of the short run (`make test`)
    steps: int
    seed: int  # of the short run
    reconcile_batch: int | None = None  # None: the code's RECONCILE_BATCH


WORKERS = {"claim", "start", "finish"}
PROFILES = {
    "whole": Profile(DispatchMachine, examples=6, steps=30, seed=26, reconcile_batch=5),
    "lost_jobs": Profile(
        focused(
            "LostJobs",
            {"submit", "submit_many", "flush_redis", "tick", "run_to_completion", "pause"},
            FocusedRules,
        ),
        examples=8,
        steps=25,
        seed=3,
        reconcile_batch=5,
    ),
    "outages": Profile(
        focused(
            "Outages", WORKERS | {"submit", "start_all_through_fault", "arm_failpoint", "tick"}, WithMixedJobs
        ),
        examples=8,
        steps=25,
        seed=26,
    ),
    "ordering": Profile(
        focused(
            "Ordering",
            {"race_two_ordered_submits", "end_slow_submit", "claim_and_start", "finish", "start"},
            FocusedRules,
        ),
        examples=10,
        steps=20,
        seed=2,
    ),
    "fair_share": Profile(
        focused("FairShare", {"backlog", "pause_for_a_while", "drain", "claim", "start"}, WithBacklogs),
        examples=10,
        steps=25,
        seed=26,
    ),
    "rescues": Profile(
        focused(
            "Rescues",
            WORKERS | {"claim_and_start", "kill_runner_and_rescue", "tick"},
            WithCappedJobs,
        ),
        examples=10,
        steps=25,
        seed=26,
    ),
}
