"""The dispatch lanes' scripts against a real Redis, claim by claim: priority first, weighted fair share
between tenants, caps and pauses, slots freed on finish and release, rebuilt after a flush.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from app.core import redis_pool
from app.core.config import get_settings
from app.dispatch import capacity, claiming, lanes, queue
from app.dispatch.lanes import Lane, Policy, Running

IN_PROGRESS_MS = 60_000


async def scripts() -> lanes.Scripts:
    return lanes.Scripts(await redis_pool.get_pool())


async def ready(policy: Policy | None = None) -> None:
    await capacity.rebuild_dispatch([], policy or Policy())


async def put(job_id: str, lane: Lane) -> None:
    assert await queue.enqueue_run(job_id, 0, lane=lane)


async def claim(slots: int) -> list[str]:
    claimed = await claiming.claim(await scripts(), get_settings().queue_name, 2**42, slots, IN_PROGRESS_MS)
    assert not claimed.rebuild
    return [job.job_id.split(":")[0] for job in claimed.jobs]


async def finish(job_id: str, run_again_in_ms: int | None = None) -> None:
    done = claiming.Finish(f"{job_id}:0", run_again_in_ms is None, None, None, False, run_again_in_ms, None)
    await claiming.record_finishes(await scripts(), get_settings().queue_name, [done])


async def test_a_claim_asks_for_a_rebuild_until_the_state_is_built(env: Any) -> None:
    await put("J1", Lane())
    claimed = await claiming.claim(await scripts(), get_settings().queue_name, 2**42, 5, IN_PROGRESS_MS)
    assert claimed.rebuild and not claimed.jobs
    await ready()
    assert await claim(5) == ["J1"]


async def test_higher_priority_is_claimed_first_then_submission_order(env: Any) -> None:
    await ready()
    for n in range(5):
        await put(f"LOW{n}", Lane(2, "acme", "demo.csv"))
    await put("HIGH", Lane(9, "acme", "demo.csv"))
    await put("MID", Lane(5, "acme", "demo.sleep"))
    assert await claim(3) == ["HIGH", "MID", "LOW0"]
    assert await claim(10) == ["LOW1", "LOW2", "LOW3", "LOW4"]


async def test_tenants_share_slots_round_robin_by_weight(env: Any) -> None:
    await ready(Policy(weights={"big": 3}))
    for n in range(100):
        await put(f"B{n:03}", Lane(5, "big", "demo.csv"))
    for n in range(100):
        await put(f"S{n:03}", Lane(5, "small", "demo.csv"))
    first = await claim(40)
    by_tenant = Counter(job_id[0] for job_id in first)
    assert by_tenant == {"B": 30, "S": 10}, by_tenant
    # Within a tenant, submission order.
    assert [j for j in first if j[0] == "S"] == [f"S{n:03}" for n in range(10)]


async def test_a_newcomer_is_served_next_not_after_the_backlog(env: Any) -> None:
    await ready()
    for n in range(50):
        await put(f"A{n:03}", Lane(5, "a", "demo.csv"))
    started = await claim(20)
    assert all(j.startswith("A") for j in started)
    for n in range(3):
        await put(f"N{n}", Lane(5, "newcomer", "demo.csv"))
    # The newcomer joins at the current virtual time: it alternates with the backlog from now on.
    assert await claim(6) == ["A020", "N0", "A021", "N1", "A022", "N2"]


async def test_a_type_cap_holds_until_a_slot_is_freed(env: Any) -> None:
    await ready(Policy(type_caps={"ledger": 2}))
    for n in range(4):
        await put(f"L{n}", Lane(5, "acme", "ledger"))
    await put("C0", Lane(5, "acme", "demo.csv"))
    assert sorted(await claim(10)) == ["C0", "L0", "L1"]
    assert await claim(10) == []
    waits = await capacity.explain_waits([Lane(5, "acme", "ledger"), Lane(5, "acme", "demo.csv")])
    assert waits[0] is not None and waits[0].document() == {"cap": "report_type:ledger", "limit": 2}
    assert waits[1] is None
    await finish("L0")
    assert await claim(10) == ["L2"]
    by_type, by_tenant = await capacity.running_counts()
    assert by_type == {"ledger": 2, "demo.csv": 1} and by_tenant == {"acme": 3}


async def test_a_tenant_cap_and_the_default_cap(env: Any) -> None:
    await ready(Policy(tenant_caps={"vip": 3}, tenant_cap_default=1))
    for tenant in ("vip", "other"):
        for n in range(4):
            await put(f"{tenant}{n}", Lane(5, tenant, "demo.csv"))
    assert Counter(j[:3] for j in await claim(10)) == {"vip": 3, "oth": 1}


async def test_a_paused_type_or_tenant_starts_nothing_until_resumed(env: Any) -> None:
    await ready()
    await put("P0", Lane(5, "acme", "slow"))
    await put("Q0", Lane(5, "beta", "demo.csv"))
    await capacity.set_policy(Policy(paused_types=frozenset({"slow"}), paused_tenants=frozenset({"beta"})))
    assert await claim(10) == []
    waits = await capacity.explain_waits([Lane(5, "acme", "slow"), Lane(5, "beta", "demo.csv")])
    assert [w.document() if w else None for w in waits] == [
        {"paused": "report_type:slow"},
        {"paused": "tenant:beta"},
    ]
    await capacity.set_policy(Policy())
    assert sorted(await claim(10)) == ["P0", "Q0"]


async def test_a_message_run_again_goes_back_to_its_lane_and_frees_its_slot(env: Any) -> None:
    await ready(Policy(type_caps={"ledger": 1}))
    await put("L0", Lane(5, "acme", "ledger"))
    await put("L1", Lane(5, "acme", "ledger"))
    assert await claim(10) == ["L0"]
    await finish("L0", run_again_in_ms=0)  # e.g. handed back at shutdown: due again at once
    assert await claim(10) == ["L0"]
    await finish("L0")
    assert await claim(10) == ["L1"]
    await finish("L1")
    assert await capacity.running_counts() == ({}, {})


async def test_releasing_a_lost_jobs_slot_drops_its_message(env: Any) -> None:
    await ready(Policy(type_caps={"ledger": 1}))
    await put("L0", Lane(5, "acme", "ledger"))
    await put("L1", Lane(5, "acme", "ledger"))
    assert await claim(10) == ["L0"]
    assert await capacity.release_slots(["L0"]) == 1
    pool = await redis_pool.get_pool()
    assert not await pool.exists("arq:job:L0:0")
    assert await claim(10) == ["L1"]


async def test_a_rebuild_holds_the_slots_of_running_jobs_until_they_finish(env: Any) -> None:
    await capacity.rebuild_dispatch([Running("R0", "acme", "ledger")], Policy(type_caps={"ledger": 1}))
    await put("L0", Lane(5, "acme", "ledger"))
    assert await claim(10) == []
    # Its worker's in-progress key went with the flush: its finish cannot tell its own run from a newer one
    # of the same job (a zombie's), so it leaves the slot; the sweep frees it once MySQL says R0 ended.
    await finish("R0")
    assert await claim(10) == []
    assert await capacity.release_slots(["R0"]) == 1
    assert await claim(10) == ["L0"]


async def test_a_finish_without_its_key_leaves_a_slot_another_message_took_over(env: Any) -> None:
    await capacity.rebuild_dispatch([Running("R0", "acme", "ledger")], Policy(type_caps={"ledger": 2}))
    await put("R0", Lane(5, "acme", "ledger"))  # the job runs again: its next message takes the slot over
    assert await claim(10) == ["R0"]
    await put("L0", Lane(5, "acme", "ledger"))
    await put("L1", Lane(5, "acme", "ledger"))
    assert await claim(10) == ["L0"]  # the second slot
    stale = claiming.Finish("R0:7", True, None, None, False, None, None)  # a run before the flush ends late
    await claiming.record_finishes(await scripts(), get_settings().queue_name, [stale])
    assert await claim(10) == []  # the slot still belongs to the running message
    await finish("R0")
    assert await claim(10) == ["L1"]


async def test_a_queued_message_nobody_holds_is_put_back_in_its_lane(env: Any) -> None:
    await ready()
    await put("L0", Lane(5, "acme", "demo.csv"))
    assert await claim(10) == ["L0"]
    pool = await redis_pool.get_pool()
    await pool.delete("arq:in-progress:L0:0")  # its worker died and its lease ran out
    assert await claim(10) == []
    assert await queue.enqueue_run("L0", 0, lane=Lane(5, "acme", "demo.csv"))  # what reconcile does
    assert await claim(10) == ["L0"]
