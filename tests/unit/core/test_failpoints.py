"""The failpoint seam: inert until armed, each action does what it says, the environment arms real
processes."""

from __future__ import annotations

import asyncio

import pytest

from app.core import failpoints
from app.core.db import is_db_outage, is_lock_conflict


@pytest.fixture(autouse=True)
def _clean() -> None:
    failpoints.disarm()


async def test_an_unarmed_point_does_nothing() -> None:
    await failpoints.hit("group_start.before_commit")


def test_only_a_known_point_can_be_armed() -> None:
    with pytest.raises(KeyError):
        failpoints.arm("no.such.point", failpoints.raising(RuntimeError()))


async def test_a_raising_point_raises_its_first_times_then_passes() -> None:
    failpoints.arm("claim.after_claim", failpoints.raising(lambda: RuntimeError("boom"), times=2))
    for _ in range(2):
        with pytest.raises(RuntimeError):
            await failpoints.hit("claim.after_claim")
    await failpoints.hit("claim.after_claim")


async def test_a_waiting_point_holds_the_caller_until_the_test_lets_it_go() -> None:
    entered, proceed = asyncio.Event(), asyncio.Event()
    with failpoints.armed("submit.after_commit", failpoints.waiting(entered, proceed)):
        task = asyncio.create_task(failpoints.hit("submit.after_commit"))
        await entered.wait()
        assert not task.done()
        proceed.set()
        await task


async def test_the_environment_arms_outages_and_deadlocks_the_code_recognises() -> None:
    failpoints.arm_from_environment(
        {"RO_FAILPOINTS": "group_start.before_commit=outage; group_start.after_commit=deadlock@1"}
    )
    with pytest.raises(Exception) as outage:
        await failpoints.hit("group_start.before_commit")
    assert is_db_outage(outage.value) and not is_lock_conflict(outage.value)
    with pytest.raises(Exception) as deadlock:
        await failpoints.hit("group_start.after_commit")
    assert is_lock_conflict(deadlock.value) and is_db_outage(deadlock.value)


async def test_a_point_armed_with_probability_zero_never_fires() -> None:
    failpoints.arm_from_environment({"RO_FAILPOINTS": "finish.before_record=outage@0"})
    for _ in range(50):
        await failpoints.hit("finish.before_record")
