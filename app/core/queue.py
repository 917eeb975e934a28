"""The arq side: one Redis pool per process and the enqueue calls, always made after the commit.

Redis only carries work; when an enqueue fails the job stays committed and the scheduler re-enqueues it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from arq import create_pool
from arq.connections import ArqRedis, RedisSettings
from arq.constants import job_key_prefix
from arq.jobs import serialize_job
from redis.asyncio.lock import Lock
from redis.asyncio.retry import Retry as RedisRetry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from app.core import lanes
from app.core.config import Settings, get_settings
from app.core.lanes import Lane, Wait

log = logging.getLogger(__name__)

RUN_REPORT = "run_report"
# Workers listen here and poll at once: an idle worker picks a new job up in milliseconds, not a poll delay.
WAKE_CHANNEL = "ro:wake"
HANDLE_DEAD_LETTER = "handle_dead_letter"
DELIVER_CALLBACK = "deliver_callback"


@dataclass(frozen=True)
class _Connection:
    """The process's pool and the enqueue script registered on that very pool: they live and go together."""

    pool: ArqRedis
    scripts: lanes.Scripts


_connection: _Connection | None = None


def redis_settings(settings: Settings, patient: bool = True) -> RedisSettings:
    """Workers (patient) retry commands with backoff for ~20 s so a Redis restart is ridden out;
    the API retries briefly, since a committed job is re-enqueued by the scheduler anyway."""
    rs = RedisSettings.from_dsn(settings.effective_redis_url)
    rs.conn_timeout = 2
    rs.conn_retries = 5
    rs.conn_retry_delay = 1
    rs.retry_on_error = [ConnectionError, TimeoutError, RedisConnectionError, RedisTimeoutError]
    rs.retry = RedisRetry(ExponentialBackoff(cap=2.0, base=0.05), retries=12 if patient else 2)
    if not patient:
        rs.conn_retries = 1
    return rs


def serialize(job: dict[str, Any]) -> bytes:
    """arq messages as JSON, never pickle: a message forged in Redis must not be able to run code."""
    return orjson.dumps(job)


def deserialize(data: bytes) -> dict[str, Any]:
    value = orjson.loads(data)
    if not isinstance(value, dict):
        raise ValueError("not an arq message")
    return value


async def _connect() -> _Connection:
    if _connection is None:
        settings = get_settings()
        set_pool(
            await create_pool(
                redis_settings(settings, patient=False),
                default_queue_name=settings.queue_name,
                job_serializer=serialize,
                job_deserializer=deserialize,
            )
        )
    assert _connection is not None
    return _connection


async def get_pool() -> ArqRedis:
    return (await _connect()).pool


def set_pool(pool: ArqRedis) -> None:
    """Use `pool` for this process's enqueues (a worker shares arq's own pool)."""
    global _connection
    _connection = _Connection(pool, lanes.Scripts(pool))


def clear_pool() -> None:
    """Forget the pool without closing it (its owner, e.g. arq's worker, closes it)."""
    global _connection
    _connection = None


async def close_pool() -> None:
    global _connection
    if _connection is not None:
        await _connection.pool.aclose()
    _connection = None


# No expiry (arq's default: a day past the due time): a message waits as long as its job legitimately does (a
# pause, a full cap, a backlog); it leaves when it runs, or when a worker finds its job no longer startable.
NO_EXPIRY = 0


def arq_job_id(job_id: str, replay_count: int, suffix: str | None = None) -> str:
    """One arq job per replay generation; retries reuse it through `Retry`, so Redis dedups re-enqueues."""
    return f"{job_id}:{replay_count}" + (f":{suffix}" if suffix else "")


async def enqueue_run(
    job_id: str,
    replay_count: int,
    defer_until: datetime | None = None,
    suffix: str | None = None,
    traceparent: str | None = None,
    lane: Lane | None = None,
) -> bool:
    """Put a report job on the main queue, in its `lane` (priority, tenant, report type): True if a new
    message was queued (or a queued one nobody held was put back in its lane), False if the job already has
    its message (whatever its arq id: one message per job) or Redis refused (logged). Never raises. A job
    whose message is running gets it once more if that run ends without running the job again.

    `traceparent` (the job's trace context) rides as a keyword argument of the message, so the attempt span
    covers picking the job up; dedup stays on the arq job id, and a message without it still works."""
    message = RunMessage(job_id, replay_count, defer_until, traceparent, lane or Lane(), suffix)
    try:
        queued, _ = await _enqueue([message])
        return queued[0]
    except Exception as exc:
        log.warning(
            "enqueue failed; the scheduler will re-enqueue", extra={"job_id": job_id, "error": repr(exc)}
        )
        return False


DEFAULT_LANE = Lane()


@dataclass(frozen=True)
class RunMessage:
    """One report job to put on the main queue (what `enqueue_run` takes, for a batch)."""

    job_id: str
    replay_count: int
    defer_until: datetime | None = None
    traceparent: str | None = None
    lane: Lane = DEFAULT_LANE
    suffix: str | None = None


async def _enqueue(messages: Sequence[RunMessage]) -> tuple[list[bool], list[Wait | None]]:
    """arq's enqueue_job for every message in one script call (dedup on the job: one message each; the
    message, the queue) plus each message's lane, and one wake-up if anything was queued. Returns, per
    message, whether it was queued and what would keep it waiting now (a pause, a full cap)."""
    connection = await _connect()
    now_ms = int(time.time() * 1000)
    args: list[str | int | bytes] = [WAKE_CHANNEL]
    for message in messages:
        arq_id = arq_job_id(message.job_id, message.replay_count, message.suffix)
        defer_until = message.defer_until
        score = int(defer_until.timestamp() * 1000) if defer_until is not None else now_ms
        kwargs = {"traceparent": message.traceparent} if message.traceparent else {}
        payload = serialize_job(RUN_REPORT, (message.job_id,), kwargs, None, now_ms, serializer=serialize)
        args += (NO_EXPIRY, payload, score, arq_id, message.lane.encoded())
    queued, waits = await connection.scripts.enqueue(keys=[get_settings().queue_name], args=args)
    return [bool(flag) for flag in queued], [Wait.parse(wait) for wait in waits]


async def enqueue_explained(message: RunMessage) -> tuple[bool, Wait | None]:
    """`enqueue_run` for a new job, also telling what would keep it waiting (for the submit's answer).
    Never raises: (False, None) when Redis refused."""
    try:
        queued, waits = await _enqueue([message])
        return queued[0], waits[0]
    except Exception as exc:
        log.warning(
            "enqueue failed; the scheduler will re-enqueue",
            extra={"job_id": message.job_id, "error": repr(exc)},
        )
        return False, None


async def enqueue_runs_explained(messages: Sequence[RunMessage]) -> list[Wait | None]:
    """`enqueue_run` for many jobs in one round trip (one script call, at most one wake-up), telling what
    would keep each new job waiting (for a batch's answers). Never raises: all None when Redis refused (the
    scheduler's reconciliation enqueues the jobs)."""
    if not messages:
        return []
    try:
        return (await _enqueue(messages))[1]
    except Exception as exc:
        log.warning(
            "batch enqueue failed; the scheduler will re-enqueue",
            extra={"jobs": len(messages), "error": repr(exc)},
        )
        return [None] * len(messages)


async def enqueue_messages(messages: Sequence[RunMessage]) -> tuple[list[bool], list[Wait | None]]:
    """`enqueue_runs_explained` telling, per message, whether it was queued and what would keep it waiting;
    raises when Redis refuses (for the scheduler, which reports it)."""
    if not messages:
        return [], []
    return await _enqueue(messages)


# ---- the dispatch state (app.core.lanes) ---------------------------------------------------------------


async def set_policy(policy: lanes.Policy) -> None:
    """Make `policy` the one every worker's claim obeys, and wake them (a resume or a raised cap)."""
    connection = await _connect()
    await connection.scripts.policy(args=[WAKE_CHANNEL, *lanes.policy_args(policy)])


async def dispatch_ready() -> bool:
    return bool(await (await get_pool()).exists(lanes.READY_KEY))


async def rebuild_dispatch(running: Sequence[lanes.Running], policy: lanes.Policy) -> bool:
    """After a flush: the policy and the slots of the running jobs, unless someone rebuilt already."""
    connection = await _connect()
    args = lanes.rebuild_args(WAKE_CHANNEL, running, policy)
    return bool(await connection.scripts.rebuild(args=args))


async def hold_slot(arq_id: str, token: str, lane: lanes.Lane, lease_ms: int) -> str:
    """Once its attempt started: the job's slot and the delivery held by this message and worker (see
    lua/hold.lua). 'ok', 'over' (a cap is full and the job holds no slot), or 'rebuild'."""
    connection = await _connect()
    args: list[str | int] = [arq_id, token, lane.tenant, lane.report_type, lease_ms, int(time.time() * 1000)]
    answer = await connection.scripts.hold(args=args)
    return answer.decode() if isinstance(answer, bytes) else str(answer)


async def release_slots(job_ids: Sequence[str], seen: Mapping[str, tuple[str, float]] | None = None) -> int:
    """Free the slots these jobs hold and drop the messages holding them (their attempts are over). With
    `seen` (from `slots_held`), only a slot still held as seen: one a claim took over since stays."""
    if seen is not None:
        job_ids = [job_id for job_id in job_ids if job_id in seen]
    if not job_ids:
        return 0
    connection = await _connect()
    keys = [get_settings().queue_name]
    args: list[str] = [WAKE_CHANNEL]
    for job_id in job_ids:
        args += [job_id, "" if seen is None else f"{seen[job_id][0]}\t{seen[job_id][1]:.0f}"]
    return int(await connection.scripts.release(keys=keys, args=args))


async def slots_held() -> dict[str, tuple[str, float]]:
    return await lanes.claims(await get_pool())


async def explain_waits(lanes_of: Sequence[Lane]) -> list[Wait | None]:
    """What would keep jobs of these lanes waiting now (a pause, a full cap): one round trip for all."""
    if not lanes_of:
        return []
    connection = await _connect()
    args = [name for lane in lanes_of for name in (lane.tenant, lane.report_type)]
    return [Wait.parse(raw) for raw in await connection.scripts.explain(args=args)]


async def running_counts() -> tuple[dict[str, int], dict[str, int]]:
    """Slots held now across every worker: by report type, by tenant."""
    return await lanes.running_counts(await get_pool())


async def enqueue_dead_letter(letter_id: str) -> bool:
    try:
        pool = await get_pool()
        await pool.enqueue_job(
            HANDLE_DEAD_LETTER,
            letter_id,
            _job_id=f"dl:{letter_id}",
            _queue_name=get_settings().dead_letter_queue_name,
        )
        return True
    except Exception as exc:
        log.warning(
            "dead-letter publish failed; the scheduler will re-publish",
            extra={"dead_letter_id": letter_id, "error": repr(exc)},
        )
        return False


async def enqueue_callback(delivery_id: str, defer_until: datetime | None = None) -> bool:
    """Completion callbacks ride the failed channel's consumer (the notifications process)."""
    try:
        pool = await get_pool()
        await pool.enqueue_job(
            DELIVER_CALLBACK,
            delivery_id,
            _job_id=f"cb:{delivery_id}",
            _queue_name=get_settings().dead_letter_queue_name,
            _defer_until=defer_until,
        )
        return True
    except Exception as exc:
        log.warning(
            "callback publish failed; the scheduler will re-publish",
            extra={"delivery_id": delivery_id, "error": repr(exc)},
        )
        return False


async def is_queued(job_id: str, replay_count: int) -> bool:
    pool = await get_pool()
    return bool(await pool.exists(job_key_prefix + arq_job_id(job_id, replay_count)))


async def ping() -> None:
    pool = await get_pool()
    await pool.ping()


async def queue_lengths() -> dict[str, int]:
    """Messages waiting in Redis (due or deferred), by queue: `main` and `dead_letter`."""
    settings = get_settings()
    pool = await get_pool()
    async with pool.pipeline(transaction=False) as pipe:
        pipe.zcard(settings.queue_name)
        pipe.zcard(settings.dead_letter_queue_name)
        main, dead_letter = await pipe.execute()
    return {"main": int(main), "dead_letter": int(dead_letter)}


async def sweep_state(name: str) -> dict[str, str]:
    """A periodic sweep's small state hash in Redis (a cursor, say), shared by every scheduler replica; empty
    when Redis lost it (a flush), which the sweep may take as a sign that Redis lost everything else too."""
    async with (await get_pool()).pipeline(transaction=False) as pipe:
        pipe.hgetall(f"ro:sweep:{name}")
        [state] = await pipe.execute()
    return {_text(k): _text(v) for k, v in state.items()}


async def save_sweep_state(name: str, values: dict[str, str]) -> None:
    async with (await get_pool()).pipeline(transaction=False) as pipe:
        pipe.hset(f"ro:sweep:{name}", mapping=values)
        await pipe.execute()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def try_lock(name: str, ttl_s: float) -> Lock | None:
    """A non-blocking Redis lock (released on exit or after ttl_s); None if someone else holds it."""
    pool = await get_pool()
    lock = pool.lock(f"ro:lock:{name}", timeout=ttl_s, blocking=False)
    return lock if await lock.acquire() else None


async def take_rate_token(tenant: str, per_minute: int) -> int | None:
    """Count one submit in the tenant's current minute; None if allowed, else seconds until the next minute.

    Fails open: with Redis unreachable the submit is allowed (MySQL still takes it) and a warning is logged.
    """
    allowed, retry_after_s = await take_rate_tokens(tenant, per_minute, 1)
    return None if allowed else retry_after_s


async def take_rate_tokens(tenant: str, per_minute: int, count: int) -> tuple[int, int]:
    """Count `count` submits in the tenant's current minute (a batch's new items, in order): how many of
    them fit the budget, and the seconds until the next minute (for the rest). Fails open like
    `take_rate_token`."""
    now = time.time()
    window = int(now // 60)
    key = f"ro:rate:{tenant}:{window}"
    retry_after_s = max(1, int((window + 1) * 60 - now + 0.999))
    try:
        pool = await get_pool()
        async with pool.pipeline(transaction=True) as pipe:
            pipe.incrby(key, count)
            pipe.expire(key, 120)
            total, _ = await pipe.execute()
    except Exception as exc:
        log.warning("rate limiter unavailable; allowing", extra={"error": repr(exc)})
        return count, retry_after_s
    before = int(total) - count
    return max(0, min(count, per_minute - before)), retry_after_s
