"""One message per job, and a slot no message runs without, script by script against the suite's Redis: a
second enqueue of a job adds nothing (whatever its arq id), a job woken while its message runs gets it once
more, a second message is never handed out, a rebuilt slot is taken over, and a worker declared lost that
finishes its old message leaves the rescue's message alone.
"""

from __future__ import annotations

from typing import Any

from app.core import redis_pool
from app.dispatch import capacity, queue
from app.dispatch.lanes import Lane, Policy, Running
from tests.utils.lanes import claim_at, finish, messages_of, now_ms, put_many, ready

LEDGER = Lane(5, "acme", "ledger")


async def enqueue(job_id: str, suffix: str | None = None, lane: Lane = LEDGER) -> bool:
    return await queue.enqueue_run(job_id, 0, suffix=suffix, lane=lane)


async def test_a_job_that_has_a_message_gets_no_second_one_whatever_its_arq_id(env: Any) -> None:
    await ready()
    assert await enqueue("J1")
    assert not await enqueue("J1", suffix="lost1")  # a rescue, a wake-up, a reconciliation: one message
    assert not await enqueue("J1")
    assert await messages_of("J1") == ["J1:0"]
    assert await claim_at(now_ms(), 10) == ["J1:0"]
    assert not await enqueue("J1", suffix="after-J0")  # running: it is asked to run once more instead
    assert await messages_of("J1") == ["J1:0"]


async def test_a_job_woken_while_its_message_runs_gets_that_message_once_more(env: Any) -> None:
    await ready()
    assert await enqueue("J1")
    assert await claim_at(now_ms(), 10) == ["J1:0"]
    assert not await enqueue("J1", suffix="after-J0")  # e.g. its start found the predecessor still running
    await finish("J1:0")  # the delivery ended without running the job (Blocked)
    assert await claim_at(now_ms(), 10) == ["J1:0"]  # the wake-up was not lost
    await finish("J1:0")
    assert await messages_of("J1") == [] and await claim_at(now_ms(), 10) == []
    assert await enqueue("J1", suffix="after-J0")  # gone for good: the next enqueue queues a new one


async def test_a_second_message_of_a_job_is_dropped_never_run_without_the_slot(env: Any) -> None:
    await ready(Policy(type_caps={"ledger": 2}))
    await put_many(["J1"], LEDGER)
    assert await claim_at(now_ms(), 1) == ["J1:0"]
    # A twin written beside the tracking (as an older release could leave one): same job, its own arq id.
    pool = await redis_pool.get_pool()
    await pool.hdel("ro:d:msg", "J1")
    assert await enqueue("J1", suffix="lost1")
    await put_many(["K1", "K2"], LEDGER)
    claimed = await claim_at(now_ms(), 10)
    assert claimed == ["K1:0"], claimed  # the twin is dropped, not handed out beside the holder
    assert await messages_of("J1") == ["J1:0"]
    await finish("J1:0")  # the holder ends; its job was asked to run once more (the twin's errand)
    assert sorted(await claim_at(now_ms(), 10)) == ["J1:0"]
    assert await capacity.running_counts() == ({"ledger": 2}, {"acme": 2})


async def test_the_slot_rebuilt_for_a_job_after_a_flush_is_taken_over_by_its_next_message(env: Any) -> None:
    await capacity.rebuild_dispatch([Running("R0", "acme", "ledger")], Policy(type_caps={"ledger": 2}))
    await put_many(["R0"], LEDGER)  # its attempt ended meanwhile and it runs again: the slot is its own
    assert await claim_at(now_ms(), 10) == ["R0:0"]
    assert await capacity.running_counts() == ({"ledger": 1}, {"acme": 1})  # one slot, not two
    assert (await capacity.slots_held())["R0"][0] == "R0:0"
    await finish("R0:0")
    assert await capacity.running_counts() == ({}, {})


async def test_a_worker_declared_lost_that_finishes_its_old_message_leaves_the_rescue_alone(env: Any) -> None:
    await ready(Policy(type_caps={"ledger": 1}))
    await put_many(["J1"], LEDGER)
    assert await claim_at(now_ms(), 10) == ["J1:0"]
    assert await capacity.release_slots(["J1"]) == 1  # the stuck scan: slot and holder message gone
    assert await enqueue("J1", suffix="lost1")
    await finish("J1:0", finish=False, run_again_in_ms=1000)  # the zombie's arq retry puts nothing back …
    assert await messages_of("J1") == ["J1:0:lost1"]
    await finish("J1:0")  # … and its end takes nothing away
    assert await messages_of("J1") == ["J1:0:lost1"]
    assert await claim_at(now_ms(), 10) == ["J1:0:lost1"]
    assert await capacity.running_counts() == ({"ledger": 1}, {"acme": 1})


async def test_a_message_run_again_later_keeps_its_slot_free_until_claimed_again(env: Any) -> None:
    await ready(Policy(type_caps={"ledger": 1}))
    await put_many(["J1", "J2"], LEDGER)
    assert await claim_at(now_ms(), 10) == ["J1:0"]
    await finish("J1:0", finish=False, run_again_in_ms=60_000)  # arq's Retry: a backoff
    assert not await enqueue("J1")  # reconciliation finds it held
    assert await claim_at(now_ms(), 10) == ["J2:0"]
    assert await messages_of("J1") == ["J1:0"]
