"""The checker (issue 26): randomized interleavings of the dispatch machinery against real MariaDB and Redis,
the whole machine and machines focused on one family of operations (tests/model/focused.py).

`make test` runs a short seeded search per machine that stops at the first failure and does not shrink (the
failure prints the whole sequence). `make soak` sets MODEL_EXAMPLES (a multiple of the short run's examples)
and MODEL_STEPS: a long random search that reports every distinct failure, shrunk. MODEL_ONLY=name,... runs
some machines only; MODEL_SHRINK=0/1 overrides shrinking; MODEL_SEED the short run's seed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis.stateful import get_state_machine_test

from app.maintenance import reconcile
from tests.model.focused import PROFILES, Profile
from tests.model.machine import Bridge, DispatchMachine

LONG = "MODEL_EXAMPLES" in os.environ
SCALE = int(os.environ.get("MODEL_EXAMPLES", "1"))
STEPS = int(os.environ.get("MODEL_STEPS", "0"))
SHRINK = os.environ.get("MODEL_SHRINK", "1" if LONG else "0") == "1"
ONLY = os.environ.get("MODEL_ONLY")
# The short run takes seconds a machine; the long one is bounded by its examples, and by this.
TIMEOUT_S = int(os.environ.get("MODEL_TIMEOUT_S", 3600 if LONG else 300))


def run_settings(profile: Profile) -> settings:
    phases = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target] + ([Phase.shrink] if SHRINK else [])
    return settings(
        max_examples=profile.examples * SCALE,
        stateful_step_count=STEPS or profile.steps,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=LONG,
        phases=phases,
    )


def build(name: str) -> Callable[[], None]:
    profile = PROFILES[name]
    test = get_state_machine_test(profile.machine, settings=run_settings(profile))
    if not LONG:
        test = seed(int(os.environ.get("MODEL_SEED", profile.seed)))(test)
    return test


# Built once at import, while no other thread runs: building parses source (hypothesis digests the machine),
# and CPython 3.11's parser fails with "AST constructor recursion depth mismatch" when another thread changes
# the recursion limit meanwhile (hypothesis does, around every run in its thread).
TESTS = {name: build(name) for name in PROFILES}


async def run_machine(bridge: Bridge, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if ONLY and name not in ONLY.split(","):
        pytest.skip(f"MODEL_ONLY={ONLY}")
    profile = PROFILES[name]
    if profile.reconcile_batch is not None:
        # Reconciliation's page (1,000 rows in the code) scaled to the model's dozens of jobs.
        monkeypatch.setattr(reconcile, "PAGE_ROWS", profile.reconcile_batch)
    DispatchMachine.bridge = bridge
    await asyncio.to_thread(TESTS[name])  # the steps run on this loop, the search in a thread


@pytest.mark.timeout(TIMEOUT_S)
async def test_dispatch_keeps_every_invariant_under_random_interleavings(
    model_bridge: Bridge, monkeypatch: pytest.MonkeyPatch
) -> None:
    await run_machine(model_bridge, "whole", monkeypatch)


@pytest.mark.timeout(TIMEOUT_S)
async def test_a_due_job_is_back_in_redis_after_a_tick_whatever_redis_lost(
    model_bridge: Bridge, monkeypatch: pytest.MonkeyPatch
) -> None:
    await run_machine(model_bridge, "lost_jobs", monkeypatch)


@pytest.mark.timeout(TIMEOUT_S)
async def test_a_started_job_always_has_a_runner_through_outages_and_deaths_at_failpoints(
    model_bridge: Bridge, monkeypatch: pytest.MonkeyPatch
) -> None:
    await run_machine(model_bridge, "outages", monkeypatch)


@pytest.mark.timeout(TIMEOUT_S)
async def test_an_ordering_key_runs_one_job_at_a_time_in_submission_order(
    model_bridge: Bridge, monkeypatch: pytest.MonkeyPatch
) -> None:
    await run_machine(model_bridge, "ordering", monkeypatch)


@pytest.mark.timeout(TIMEOUT_S)
async def test_tenants_with_claimable_work_get_their_weighted_share(
    model_bridge: Bridge, monkeypatch: pytest.MonkeyPatch
) -> None:
    await run_machine(model_bridge, "fair_share", monkeypatch)


@pytest.mark.timeout(TIMEOUT_S)
async def test_running_jobs_stay_counted_against_caps_through_lost_worker_rescues(
    model_bridge: Bridge, monkeypatch: pytest.MonkeyPatch
) -> None:
    await run_machine(model_bridge, "rescues", monkeypatch)
