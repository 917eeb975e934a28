"""Fair share's virtual time, claim by claim against the suite's Redis: a tenant that could start nothing
for a while (its work deferred, paused or at its cap) comes back level with the others, not owed every slot,
and a newcomer joins level with the tenants that are starting work.
"""

from __future__ import annotations

from typing import Any

from app.dispatch import capacity
from app.dispatch.lanes import Lane, Policy
from tests.utils.lanes import by_tenant, claim_at, now_ms, put_many, ready

HOUR_MS = 3_600_000
A, B = Lane(5, "a", "demo.csv"), Lane(5, "b", "demo.csv")


def evenly(claims: list[str], tenants: str = "AB") -> bool:
    """Two tenants shared the claims half and half, give or take one."""
    counts = by_tenant(claims)
    return set(counts) <= set(tenants) and all(abs(counts[t] - len(claims) / 2) <= 1 for t in tenants)


async def test_a_tenant_whose_work_was_deferred_does_not_take_every_slot_when_it_comes_due(env: Any) -> None:
    await ready()
    now = now_ms()
    await put_many([f"A{n:03}" for n in range(150)], A, due_ms=now + HOUR_MS)  # run_at next hour, a backoff
    await put_many([f"B{n:03}" for n in range(300)], B)
    assert by_tenant(await claim_at(now_ms(), 100)) == {"B": 100}
    later = await claim_at(now + HOUR_MS + 1, 100)
    assert evenly(later), by_tenant(later)


async def test_a_tenant_that_was_paused_does_not_take_every_slot_when_resumed(env: Any) -> None:
    await ready(Policy(paused_tenants=frozenset({"a"})))
    await put_many([f"A{n:03}" for n in range(150)], A)
    await put_many([f"B{n:03}" for n in range(300)], B)
    assert by_tenant(await claim_at(now_ms(), 100)) == {"B": 100}
    await capacity.set_policy(Policy())
    resumed = await claim_at(now_ms(), 100)
    assert evenly(resumed), by_tenant(resumed)


async def test_a_tenant_that_was_at_its_cap_does_not_take_every_slot_when_the_cap_is_raised(env: Any) -> None:
    await ready(Policy(tenant_caps={"a": 1}))
    await put_many([f"A{n:03}" for n in range(150)], A)
    await put_many([f"B{n:03}" for n in range(300)], B)
    assert by_tenant(await claim_at(now_ms(), 100)) == {"A": 1, "B": 99}
    await capacity.set_policy(Policy())
    raised = await claim_at(now_ms(), 100)
    assert evenly(raised), by_tenant(raised)


async def test_a_newcomer_joins_level_with_the_tenants_starting_work_not_a_waiting_ones_old_pass(
    env: Any,
) -> None:
    await ready()
    now = now_ms()
    await put_many([f"A{n:03}" for n in range(50)], A, due_ms=now + HOUR_MS)
    await put_many([f"B{n:03}" for n in range(300)], B)
    assert by_tenant(await claim_at(now_ms(), 100)) == {"B": 100}
    await put_many([f"C{n:03}" for n in range(150)], Lane(5, "c", "demo.csv"))
    after = await claim_at(now_ms(), 100)
    assert evenly(after, "BC"), by_tenant(after)


async def test_weights_still_share_the_slots_while_another_tenant_waits(env: Any) -> None:
    await ready(Policy(weights={"b": 3}, paused_tenants=frozenset({"a"})))
    await put_many([f"A{n:03}" for n in range(50)], A)
    await put_many([f"B{n:03}" for n in range(300)], B)
    await put_many([f"C{n:03}" for n in range(300)], Lane(5, "c", "demo.csv"))
    counts = by_tenant(await claim_at(now_ms(), 100))
    assert counts == {"B": 75, "C": 25}, counts
