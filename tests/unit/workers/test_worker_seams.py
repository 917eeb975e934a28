"""OrchestratorWorker extends arq through arq's own method names: these tests fail if a newer arq renames one,
and if importing our worker modules patches arq's Worker again (issue 11: arq extended, not patched).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import inspect
from typing import Any

import arq.worker
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from app.dispatch.scripts import RETRY_KEY_TTL_S
from workers.base import OrchestratorWorker

# Public methods of arq's Worker we override; every `_` method we define must override one of arq's too.
ARQ_PUBLIC_SEAMS = {"close", "main", "async_run", "finish_job"}
SEAMS = ("_poll_iteration", "_release_sem_dec_counter_on_complete")


def overridden_names() -> list[str]:
    return sorted(
        name
        for name, value in vars(OrchestratorWorker).items()
        if callable(value) and (name.startswith("_") or name in ARQ_PUBLIC_SEAMS)
    )


def test_every_method_the_subclass_overrides_still_exists_in_arq() -> None:
    names = overridden_names()
    assert {*SEAMS, "close"} <= set(names), f"the seam list looks wrong: {names}"
    for name in names:
        assert hasattr(arq.worker.Worker, name), (
            f"arq {arq.VERSION} no longer has Worker.{name}, which OrchestratorWorker overrides: "
            "check what replaced it in arq/worker.py and move the override there"
        )
        assert callable(getattr(arq.worker.Worker, name)), (
            f"arq {arq.VERSION}: Worker.{name} is no longer a method, OrchestratorWorker overrides it as one"
        )


# app/dispatch/running.py follows arq's Worker.run_job step for step from where its first round trip ends
# (that round trip is in our claim scripts). The digest of the run_job it was written against: a different
# one means arq changed how a job runs, and running.py (and the claim scripts) must be checked against it.
ARQ_RUN_JOB_SHA256 = "589a19059ff84ee777552dc9fa5ff76b17d6d0d7f99716d2720a2ed07ccb9607"


def test_arqs_run_job_is_still_the_one_our_claimed_runs_follow() -> None:
    source = inspect.getsource(arq.worker.Worker.run_job)
    digest = hashlib.sha256(source.encode()).hexdigest()
    assert digest == ARQ_RUN_JOB_SHA256, (
        f"arq {arq.VERSION} changed Worker.run_job: compare it with app/dispatch/running.py (and what the "
        "claim scripts read for it: app/dispatch/lua/claimed_message.lua), then update ARQ_RUN_JOB_SHA256"
    )
    assert f"retry_key_prefix + job_id, {RETRY_KEY_TTL_S}" in source, "arq keeps try counts for another time"


def test_importing_the_worker_modules_leaves_arq_unpatched() -> None:
    # Captured from arq before our worker modules are imported (or re-checked, if an earlier test did it).
    originals = {name: vars(arq.worker.Worker)[name] for name in SEAMS}
    importlib.import_module("workers.report_worker")
    importlib.import_module("workers.dead_letter")
    for name, original in originals.items():
        current = vars(arq.worker.Worker)[name]
        assert current is original, f"importing our workers replaced arq.worker.Worker.{name}"
        # Also catches a patch made before this test captured anything (an earlier import in the session).
        assert (current.__module__, current.__qualname__) == ("arq.worker", f"Worker.{name}"), (
            f"arq.worker.Worker.{name} is {current.__module__}.{current.__qualname__}, not arq's own"
        )


def build(**overrides: Any) -> OrchestratorWorker:
    async def noop(ctx: dict[str, Any]) -> None:
        return None

    # Nothing connects until the worker runs: these tests drive single methods, without a Redis server.
    return OrchestratorWorker(**{"functions": [noop], "handle_signals": False, **overrides})


async def test_a_redis_error_in_a_poll_backs_off_instead_of_ending_the_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker = build()

    async def redis_down() -> None:
        raise RedisConnectionError("Connection refused")

    sleeps: list[float] = []

    async def no_sleep(delay_s: float) -> None:
        sleeps.append(delay_s)

    monkeypatch.setattr(worker, "start_waking", lambda: None)
    monkeypatch.setattr(worker, "poll_now", redis_down)
    monkeypatch.setattr(asyncio, "sleep", no_sleep)
    for _ in range(8):
        await worker._poll_iteration()
    assert sleeps == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]


async def test_a_freed_slot_wakes_a_poll_once_the_wake_ups_run() -> None:
    worker = build()
    worker.job_counter = 1
    await worker.sem.acquire()
    worker._release_sem_dec_counter_on_complete()
    assert worker.job_counter == 0
    assert not worker._wake.is_set(), "no wake-up runner yet: nothing to wake"

    async def idle() -> None:
        await asyncio.Event().wait()

    worker.job_counter = 1
    await worker.sem.acquire()
    worker._wake_tasks = [asyncio.create_task(idle())]  # stands in for the running wake-up tasks
    worker._release_sem_dec_counter_on_complete()
    assert worker._wake.is_set()
    await worker.stop_waking()
    assert worker._wake_tasks == [] and not worker._wake.is_set()
