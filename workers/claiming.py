"""The worker's Redis round trips, batched: one script claims every due job a poll can take (arq's
WATCH/MULTI per job, for all of them at once); one transaction records the jobs that finished together.

Keys and semantics are arq's own (arq.constants): a claimed job gets arq's in-progress key with arq's
timeout, a finished one loses its job, retry and in-progress keys and leaves the queue, as in arq.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from arq.connections import ArqRedis
from arq.constants import (
    abort_jobs_ss,
    in_progress_key_prefix,
    job_key_prefix,
    result_key_prefix,
    retry_key_prefix,
)
from redis.commands.core import AsyncScript

# KEYS[1] the queue; ARGV: now (ms), how many queue entries to look at, free slots, the in-progress key
# prefix, the in-progress timeout (ms). Returns the claimed (id, score) pairs and the queue's head with its
# score, for the wake-up timer. Like arq's WATCH/MULTI, a job whose in-progress key exists is skipped.
CLAIM_LUA = """
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
    head_score_ms: float | None  # the earliest score left in the queue


def claim_script(pool: ArqRedis) -> AsyncScript:
    return pool.register_script(CLAIM_LUA)


async def claim(
    script: AsyncScript, queue_name: str, now_ms: int, read_limit: int, slots: int, in_progress_ms: int
) -> Claim:
    claimed, head = await script(
        keys=[queue_name], args=[now_ms, read_limit, slots, in_progress_key_prefix, in_progress_ms]
    )
    jobs = [(claimed[i].decode(), int(float(claimed[i + 1]))) for i in range(0, len(claimed), 2)]
    return Claim(jobs, float(head[1]) if head else None)


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


async def record_finishes(pool: ArqRedis, queue_name: str, finishes: list[Finish]) -> list[Any]:
    """arq's `finish_job` for several jobs in one MULTI/EXEC."""
    async with pool.pipeline(transaction=True) as tr:
        for done in finishes:
            delete_keys = []
            in_progress_key = in_progress_key_prefix + done.job_id
            if done.keep_in_progress is None:
                delete_keys.append(in_progress_key)
            else:
                tr.pexpire(in_progress_key, round(done.keep_in_progress * 1000))
            if done.finish:
                if done.result_data:
                    expire = None if done.keep_result_forever else done.result_timeout_s
                    tr.set(result_key_prefix + done.job_id, done.result_data, px=_ms(expire))
                delete_keys += [retry_key_prefix + done.job_id, job_key_prefix + done.job_id]
                tr.zrem(abort_jobs_ss, done.job_id)
                tr.zrem(queue_name, done.job_id)
            elif done.incr_score:
                tr.zincrby(queue_name, done.incr_score, done.job_id)
            if delete_keys:
                tr.delete(*delete_keys)
        await tr.execute()
    return [None] * len(finishes)


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)
