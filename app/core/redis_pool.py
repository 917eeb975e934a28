"""The process's one Redis pool (arq's, so the worker and every enqueue share it) and the small Redis helpers
every package may use: a non-blocking lock, the submit rate limiter, a periodic sweep's state hash.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from importlib import resources
from typing import Any, TypeVar

import orjson
from arq import create_pool
from arq.connections import ArqRedis, RedisSettings
from redis.asyncio.lock import Lock
from redis.asyncio.retry import Retry as RedisRetry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from app.core.config import Settings, get_settings

log = logging.getLogger(__name__)

T = TypeVar("T")

_pool: ArqRedis | None = None
# What was made for the current pool (scripts registered on it): it lives and goes with the pool, so a
# closed pool is not kept alive by it, nor is it handed to a new pool.
_companions: dict[str, Any] = {}


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


async def get_pool() -> ArqRedis:
    """The process's pool, created at first use (a worker sets arq's own with `set_pool`)."""
    global _pool
    if _pool is None:
        settings = get_settings()
        _companions.clear()
        _pool = await create_pool(
            redis_settings(settings, patient=False),
            default_queue_name=settings.queue_name,
            job_serializer=serialize,
            job_deserializer=deserialize,
        )
    return _pool


def set_pool(pool: ArqRedis) -> None:
    """Use `pool` for this process's Redis calls (a worker shares arq's own pool)."""
    global _pool
    _pool = pool
    _companions.clear()


def clear_pool() -> None:
    """Forget the pool without closing it (its owner, e.g. arq's worker, closes it)."""
    global _pool
    _pool = None
    _companions.clear()


async def close_pool() -> None:
    global _pool
    if _pool is not None:
        await _pool.aclose()
    _pool = None
    _companions.clear()


async def companion(name: str, build: Callable[[ArqRedis], T]) -> T:
    """`build(pool)` for the current pool, made once and kept until the pool changes (e.g. scripts
    registered on it)."""
    pool = await get_pool()
    if name not in _companions:
        _companions[name] = build(pool)
    made: T = _companions[name]
    return made


async def ping() -> None:
    await (await get_pool()).ping()


async def try_lock(name: str, ttl_s: float) -> Lock | None:
    """A non-blocking Redis lock (released on exit or after ttl_s); None if someone else holds it."""
    pool = await get_pool()
    lock = pool.lock(f"ro:lock:{name}", timeout=ttl_s, blocking=False)
    return lock if await lock.acquire() else None


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


def _lua(name: str) -> str:
    return resources.files("app.core").joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


SWEEP_BEGIN_LUA = _lua("sweep_begin")
SWEEP_SAVE_LUA = _lua("sweep_save")


async def begin_sweep(name: str, epoch: str) -> str:
    """A full walk's epoch: the one under way (resumed), else `epoch` over a state cleared of older ones."""
    script = (await get_pool()).register_script(SWEEP_BEGIN_LUA)
    return _text(await script(keys=[f"ro:sweep:{name}"], args=[epoch]))


async def save_sweep_state_if(name: str, epoch: str, steady: bool, values: dict[str, str]) -> bool:
    """Save `values` only while the state still holds `epoch` (and, `steady`, its swept mark): False when a
    flush or a newer walk came in between, and the walker should stop."""
    args = [epoch, "1" if steady else "0", *(item for pair in values.items() for item in pair)]
    script = (await get_pool()).register_script(SWEEP_SAVE_LUA)
    return bool(await script(keys=[f"ro:sweep:{name}"], args=args))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


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
