"""The process's Redis pool and its enqueue script live and go together (no registry keyed by id())."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from app.core import redis_pool
from app.dispatch import queue


async def test_a_closed_pool_leaves_no_script_behind_and_a_new_pool_enqueues(env: Any) -> None:
    first = await redis_pool.get_pool()
    assert await queue.enqueue_run("01JD3Z7Q8J5Q0V6W2XKX4N9M1B", 0)
    first_ref = weakref.ref(first)
    await redis_pool.close_pool()
    del first
    gc.collect()
    # A script kept for the closed pool would keep it alive, and could be handed to a new pool that
    # happens to get the same id().
    assert first_ref() is None
    assert await queue.enqueue_run("01JD3Z7Q8J5Q0V6W2XKX4N9M1C", 0)
    from app.core.config import get_settings

    assert await (await redis_pool.get_pool()).zcard(get_settings().queue_name) == 2


async def test_a_pool_set_by_a_worker_is_used_with_a_script_of_its_own(env: Any) -> None:
    own = await redis_pool.get_pool()
    await redis_pool.close_pool()
    from arq import create_pool

    from app.core.config import get_settings

    worker_pool = await create_pool(redis_pool.redis_settings(get_settings()))
    try:
        redis_pool.set_pool(worker_pool)
        assert await redis_pool.get_pool() is worker_pool and worker_pool is not own
        assert await queue.enqueue_run("01JD3Z7Q8J5Q0V6W2XKX4N9M1D", 0)
        assert await worker_pool.zcard(get_settings().queue_name) == 1
    finally:
        redis_pool.clear_pool()
        await worker_pool.aclose()
