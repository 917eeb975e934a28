"""The worker's Redis round trips, batched: one script claims every due job a poll can take, picked from the
dispatch lanes (app.dispatch.lanes: priority, fair share, caps, pauses), and reads what arq's run_job would
read for each; one script records the jobs that finished together and frees their slots.

Keys and semantics are arq's own (arq.constants): a claimed job gets arq's in-progress key with arq's
timeout, a finished one loses its job, retry and in-progress keys and leaves the queue, as in arq.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from arq.connections import ArqRedis
from redis.commands.core import AsyncScript

from app.dispatch import lanes
from app.dispatch.queue import WAKE_CHANNEL
from app.dispatch.running import Claimed
from app.dispatch.scripts import CLAIMED_FIELDS, QUEUE_CLAIM_LUA

# A worker's delivery token: the value of the in-progress keys it sets, so a finish only acts on a message its
# own delivery still holds (a process has its own; tests that play one worker use the default).
DEFAULT_TOKEN = "1"


@dataclass(frozen=True)
class Claim:
    jobs: list[Claimed]
    next_due_ms: float | None  # the earliest future due time of a lane the claim looked at
    rebuild: bool = False  # the dispatch state is gone (a flush): rebuild it from MySQL, then claim


async def claim(
    scripts: lanes.Scripts,
    queue_name: str,
    now_ms: int,
    slots: int,
    in_progress_ms: int,
    aborts: bool = False,
    token: str = DEFAULT_TOKEN,
) -> Claim:
    args: list[str | int] = [now_ms, slots, in_progress_ms, int(aborts), token]
    result = await scripts.claim(keys=[queue_name], args=args)
    if result and result[0] == b"rebuild":
        return Claim([], None, rebuild=True)
    claimed, next_due = result
    due = float(next_due)
    return Claim(_messages(claimed), due if due >= 0 else None)


def queue_claim_script(pool: ArqRedis) -> AsyncScript:
    return pool.register_script(QUEUE_CLAIM_LUA)


async def claim_in_time_order(
    script: AsyncScript,
    queue_name: str,
    now_ms: int,
    read_limit: int,
    slots: int,
    in_progress_ms: int,
    aborts: bool = False,
    token: str = DEFAULT_TOKEN,
) -> Claim:
    args: list[str | int] = [now_ms, read_limit, slots, in_progress_ms, int(aborts), token]
    claimed, head = await script(keys=[queue_name], args=args)
    head_ms = float(head[1]) if head else None
    return Claim(_messages(claimed), head_ms if head_ms is not None and head_ms > now_ms else None)


def _messages(flat: list[Any]) -> list[Claimed]:
    """The claim scripts' flat answer (scripts.CLAIMED_MESSAGE_LUA), one `Claimed` a message."""
    step = CLAIMED_FIELDS
    return [
        Claimed(
            job_id=flat[i].decode(),
            score=int(float(flat[i + 1])),
            payload=flat[i + 2] or None,
            job_try=int(flat[i + 3]),
            aborted=flat[i + 4] == 1,
        )
        for i in range(0, len(flat), step)
    ]


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


async def record_finishes(
    scripts: lanes.Scripts, queue_name: str, finishes: list[Finish], token: str = DEFAULT_TOKEN
) -> list[Any]:
    """arq's `finish_job` for several jobs in one script call, freeing their slots; only the messages this
    worker's deliveries (`token`) still hold are touched."""
    args: list[Any] = [WAKE_CHANNEL, token]
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
