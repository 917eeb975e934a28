"""The arq side: one Redis pool per process and the enqueue calls, always made after the commit.

Redis only carries work; when an enqueue fails the job stays committed and the scheduler re-enqueues it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from arq import create_pool
from arq.connections import ArqRedis, RedisSettings
from arq.constants import job_key_prefix, result_key_prefix
from arq.jobs import serialize_job
from redis.asyncio.lock import Lock
from redis.asyncio.retry import Retry as RedisRetry
from redis.backoff import ExponentialBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from app.core.config import Settings, get_settings

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
    enqueue_script: AsyncScript
    enqueue_many_script: AsyncScript


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
    _connection = _Connection(
        pool, pool.register_script(_ENQUEUE_LUA), pool.register_script(_ENQUEUE_MANY_LUA)
    )


def clear_pool() -> None:
    """Forget the pool without closing it (its owner, e.g. arq's worker, closes it)."""
    global _connection
    _connection = None


async def close_pool() -> None:
    global _connection
    if _connection is not None:
        await _connection.pool.aclose()
    _connection = None


# arq's enqueue_job in one round trip instead of three, plus the wake-up: dedup on the job and result keys
# (arq's own rule), write the job, add it to the queue, and wake idle workers: they take it now, or arm a
# timer for it when it is deferred.
_ENQUEUE_LUA = """
if redis.call('exists', KEYS[1], KEYS[2]) > 0 then return 0 end
redis.call('psetex', KEYS[1], ARGV[1], ARGV[2])
redis.call('zadd', KEYS[3], ARGV[3], ARGV[4])
redis.call('publish', ARGV[5], '1')
return 1
"""
EXPIRES_EXTRA_MS = 86_400_000  # arq's default: a message not started within a day of its due time expires


def arq_job_id(job_id: str, replay_count: int, suffix: str | None = None) -> str:
    """One arq job per replay generation; retries reuse it through `Retry`, so Redis dedups re-enqueues."""
    return f"{job_id}:{replay_count}" + (f":{suffix}" if suffix else "")


async def enqueue_run(
    job_id: str,
    replay_count: int,
    defer_until: datetime | None = None,
    suffix: str | None = None,
    traceparent: str | None = None,
) -> bool:
    """Put a report job on the main queue: True if a new message was queued, False if one with that id was
    already there (arq's dedup) or Redis refused (logged). Never raises.

    `traceparent` (the job's trace context) rides as a keyword argument of the message, so the attempt span
    covers picking the job up; dedup stays on the arq job id, and a message without it still works."""
    try:
        connection = await _connect()
        arq_id = arq_job_id(job_id, replay_count, suffix)
        now_ms = int(time.time() * 1000)
        score = int(defer_until.timestamp() * 1000) if defer_until is not None else now_ms
        kwargs = {"traceparent": traceparent} if traceparent else {}
        payload = serialize_job(RUN_REPORT, (job_id,), kwargs, None, now_ms, serializer=serialize)
        created = await connection.enqueue_script(
            keys=[job_key_prefix + arq_id, result_key_prefix + arq_id, get_settings().queue_name],
            args=[
                max(1, score - now_ms) + EXPIRES_EXTRA_MS,
                payload,
                score,
                arq_id,
                WAKE_CHANNEL,
            ],
        )
        return bool(created)
    except Exception as exc:
        log.warning(
            "enqueue failed; the scheduler will re-enqueue", extra={"job_id": job_id, "error": repr(exc)}
        )
        return False


@dataclass(frozen=True)
class RunMessage:
    """One report job to put on the main queue (what `enqueue_run` takes, for a batch)."""

    job_id: str
    replay_count: int
    defer_until: datetime | None = None
    traceparent: str | None = None


# The batch form of _ENQUEUE_LUA: the same dedup and writes per job, then one wake-up if anything was queued.
# KEYS: the queue, then each job's job key and result key; ARGV: the wake channel, then per job its expiry
# (ms), message, score and arq id.
_ENQUEUE_MANY_LUA = """
local queued = 0
for i = 0, (#KEYS - 1) / 2 - 1 do
  local job_key, result_key, arg = KEYS[2 + 2 * i], KEYS[3 + 2 * i], 2 + 4 * i
  if redis.call('exists', job_key, result_key) == 0 then
    redis.call('psetex', job_key, ARGV[arg], ARGV[arg + 1])
    redis.call('zadd', KEYS[1], ARGV[arg + 2], ARGV[arg + 3])
    queued = queued + 1
  end
end
if queued > 0 then redis.call('publish', ARGV[1], '1') end
return queued
"""


async def enqueue_runs(messages: Sequence[RunMessage]) -> int:
    """`enqueue_run` for many jobs in one round trip (one script call) and at most one wake-up; returns how
    many new messages were queued. Never raises: on failure the jobs stay committed and the scheduler's
    reconciliation enqueues them."""
    if not messages:
        return 0
    try:
        connection = await _connect()
        now_ms = int(time.time() * 1000)
        keys: list[str] = [get_settings().queue_name]
        args: list[str | int | bytes] = [WAKE_CHANNEL]
        for message in messages:
            arq_id = arq_job_id(message.job_id, message.replay_count)
            defer_until = message.defer_until
            score = int(defer_until.timestamp() * 1000) if defer_until is not None else now_ms
            kwargs = {"traceparent": message.traceparent} if message.traceparent else {}
            payload = serialize_job(RUN_REPORT, (message.job_id,), kwargs, None, now_ms, serializer=serialize)
            keys += (job_key_prefix + arq_id, result_key_prefix + arq_id)
            args += (max(1, score - now_ms) + EXPIRES_EXTRA_MS, payload, score, arq_id)
        return int(await connection.enqueue_many_script(keys=keys, args=args))
    except Exception as exc:
        log.warning(
            "batch enqueue failed; the scheduler will re-enqueue",
            extra={"jobs": len(messages), "error": repr(exc)},
        )
        return 0


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
