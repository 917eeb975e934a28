"""The worker's Redis round trips, batched: one script claims every due job a poll can take, picked from the
dispatch lanes (app.core.lanes: priority, fair share, caps, pauses); one script records the jobs that
finished together and frees their slots.

Keys and semantics are arq's own (arq.constants): a claimed job gets arq's in-progress key with arq's
timeout, a finished one loses its job, retry and in-progress keys and leaves the queue, as in arq.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix
from redis.commands.core import AsyncScript

from app.core import lanes
from app.core.queue import WAKE_CHANNEL

# The dead-letter consumer's queue has no lanes: it is claimed in time order, as arq does.
# KEYS[1] the queue; ARGV: now (ms), how many queue entries to look at, free slots, the in-progress key
# prefix, the in-progress timeout (ms). Returns the claimed (id, score) pairs and the queue's head with its
# score, for the wake-up timer. Like arq's WATCH/MULTI, a job whose in-progress key exists is skipped.
QUEUE_CLAIM_LUA = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
local slots = tonumber(ARGV[3])
local claimed = {}
for i = 1, #due, 2 do
  if #claimed >= 2 * slots then break end
  local key = ARGV[4] .. due[i]
  if redis.call('EXISTS', key) == 0 then
    redis.call('PSETEX', key, ARGV[5], '1')
    claimed[#claimed + 1] = due[i]
    claimed[#claimed + 1] = due[i + 1]
  end
end
return {claimed, redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')}
"""


@dataclass(frozen=True)
class Claim:
    jobs: list[tuple[str, int]]  # (arq job id, score in ms)
    next_due_ms: float | None  # the earliest future due time of a lane the claim looked at
    rebuild: bool = False  # the dispatch state is gone (a flush): rebuild it from MySQL, then claim


async def claim(
    scripts: lanes.Scripts, queue_name: str, now_ms: int, slots: int, in_progress_ms: int
) -> Claim:
    result = await scripts.claim(keys=[queue_name], args=[now_ms, slots, in_progress_ms])
    if result and result[0] == b"rebuild":
        return Claim([], None, rebuild=True)
    claimed, next_due = result
    jobs = [(claimed[i].decode(), int(float(claimed[i + 1]))) for i in range(0, len(claimed), 2)]
    due = float(next_due)
    return Claim(jobs, due if due >= 0 else None)


def queue_claim_script(pool: ArqRedis) -> AsyncScript:
    return pool.register_script(QUEUE_CLAIM_LUA)


async def claim_in_time_order(
    script: AsyncScript, queue_name: str, now_ms: int, read_limit: int, slots: int, in_progress_ms: int
) -> Claim:
    claimed, head = await script(
        keys=[queue_name], args=[now_ms, read_limit, slots, in_progress_key_prefix, in_progress_ms]
    )
    jobs = [(claimed[i].decode(), int(float(claimed[i + 1]))) for i in range(0, len(claimed), 2)]
    head_ms = float(head[1]) if head else None
    return Claim(jobs, head_ms if head_ms is not None and head_ms > now_ms else None)


@dataclass(frozen=True)
class Finish:
    """The arguments arq's `Worker.finish_job` gets, for one job."""

    job_id: str
    finish: bool
    result_data: bytes | None
    result_timeout_s: float | None
    keep_result_forever: bool
    incr_score: int | None
    keep_in_progress: float | None


async def record_finishes(scripts: lanes.Scripts, queue_name: str, finishes: list[Finish]) -> list[Any]:
    """arq's `finish_job` for several jobs in one script call, freeing their slots."""
    args: list[Any] = [WAKE_CHANNEL]
    for done in finishes:
        result = b""
        result_px: int | str = ""
        if done.finish and done.result_data:
            result = done.result_data
            expire = None if done.keep_result_forever else done.result_timeout_s
            result_px = _ms(expire) or ""
        args += [
            done.job_id,
            1 if done.finish else 0,
            result,
            result_px,
            done.incr_score if (not done.finish and done.incr_score) else "",
            "" if done.keep_in_progress is None else _ms(done.keep_in_progress) or 0,
        ]
    await scripts.finish(keys=[queue_name], args=args)
    return [None] * len(finishes)


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)
