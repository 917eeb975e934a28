"""The dispatch scripts driven by hand against the suite's Redis: messages put in lanes (due now or later),
claims made at a chosen time as a worker makes them, finishes, and what Redis holds for a job.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime

from app.core import redis_pool
from app.core.config import get_settings
from app.dispatch import capacity, claiming, lanes, queue
from app.dispatch.lanes import Lane, Policy

IN_PROGRESS_MS = 60_000


def now_ms() -> int:
    return int(time.time() * 1000)


async def scripts() -> lanes.Scripts:
    return lanes.Scripts(await redis_pool.get_pool())


async def ready(policy: Policy | None = None) -> None:
    """The dispatch state as after a rebuild with nothing running."""
    await capacity.rebuild_dispatch([], policy or Policy())


async def put_many(job_ids: list[str], lane: Lane, due_ms: int | None = None) -> None:
    """A message for each job (arq id `{job}:0`), in `lane`, due at `due_ms` (now if None)."""
    defer = datetime.fromtimestamp(due_ms / 1000, UTC) if due_ms is not None else None
    queued, _ = await queue.enqueue_messages(
        [queue.RunMessage(job_id, 0, defer_until=defer, lane=lane) for job_id in job_ids]
    )
    assert all(queued), queued


async def claim_at(at_ms: int, slots: int, token: str = claiming.DEFAULT_TOKEN) -> list[str]:
    """The arq ids a worker with `slots` free slots (and delivery token `token`) claims at `at_ms`."""
    queue_name = get_settings().queue_name
    claimed = await claiming.claim(await scripts(), queue_name, at_ms, slots, IN_PROGRESS_MS, token=token)
    assert not claimed.rebuild
    return [job.job_id for job in claimed.jobs]


async def finish(arq_id: str, finish: bool = True, run_again_in_ms: int | None = None) -> None:
    """arq's finish of one message: for good (`finish`), or back in its lane after `run_again_in_ms`."""
    done = claiming.Finish(arq_id, finish, None, None, False, run_again_in_ms, None)
    await claiming.record_finishes(await scripts(), get_settings().queue_name, [done])


async def dropped_by_a_worker(arq_id: str) -> None:
    """A worker that held the message (its in-progress key, its token) ends it for good: e.g. it Skipped a
    job MySQL says is not its to run. The message leaves Redis whatever MySQL says of its job."""
    pool = await redis_pool.get_pool()
    await pool.set(f"arq:in-progress:{arq_id}", claiming.DEFAULT_TOKEN, px=IN_PROGRESS_MS)
    await finish(arq_id)


def by_tenant(arq_ids: list[str]) -> Counter[str]:
    """Claims counted by the tenant letter their job ids start with (`A007:0` → "A")."""
    return Counter(arq_id[0] for arq_id in arq_ids)


async def messages_of(job_id: str) -> list[str]:
    """Every message Redis holds for the job (queued, in a lane or in progress), whatever its arq id."""
    pool = await redis_pool.get_pool()
    members = await pool.zrange(get_settings().queue_name, 0, -1)
    return sorted(m.decode() for m in members if m.decode().split(":")[0] == job_id)


async def in_a_lane(job_ids: list[str]) -> set[str]:
    """Those of the jobs whose message waits in a lane (where a worker's claim can take it)."""
    pool = await redis_pool.get_pool()
    async with pool.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hget("ro:d:msg", job_id)
        held = await pipe.execute()
    async with pool.pipeline(transaction=False) as pipe:
        for arq_id in held:
            pipe.hget("ro:d:meta", arq_id or b"-")
        lanes_of = await pipe.execute()
    async with pool.pipeline(transaction=False) as pipe:
        for arq_id, lane in zip(held, lanes_of, strict=True):
            pipe.zscore(b"ro:d:lane:" + (lane or b"-"), arq_id or b"-")
        scores = await pipe.execute()
    return {job_id for job_id, score in zip(job_ids, scores, strict=True) if score is not None}
