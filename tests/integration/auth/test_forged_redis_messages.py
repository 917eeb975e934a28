"""A compromised Redis: a forged queue message neither runs a finished job again nor, carrying a pickle,
runs code in a worker."""

from __future__ import annotations

import os
import pickle
import secrets
import time
from pathlib import Path
from typing import Any

import httpx

from app.core import redis_pool
from app.core.config import get_settings
from app.dispatch import capacity, lanes, queue
from tests.utils.jobs import submit_id
from tests.utils.refused_requests import job_state
from tests.utils.workers import drain


async def test_forged_queue_message_for_a_finished_job_does_not_run_it_again(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_id = await submit_id(client, auth, "demo.csv", rows=3)
    await drain()
    before = await job_state(job_id)
    assert before["status"] == "done"
    for replay, suffix in ((0, "forged"), (7, None)):  # one message per job: each runs before the next
        assert await queue.enqueue_run(job_id, replay, suffix=suffix)
        await drain()
    assert await job_state(job_id) == before


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (str(self.marker),))


async def test_forged_redis_message_cannot_run_code_in_a_worker(env: Any, tmp_path: Path) -> None:
    from arq.constants import job_key_prefix

    marker = tmp_path / "pwned"
    pool = await redis_pool.get_pool()
    forged_id = "forged-" + secrets.token_hex(4)
    # Written where a worker takes messages from: arq's keys and a dispatch lane (app.dispatch.lanes).
    await capacity.rebuild_dispatch([], lanes.Policy())
    now_ms = int(time.time() * 1000)
    args = [
        queue.WAKE_CHANNEL,
        60_000,
        pickle.dumps(_Payload(marker)),
        now_ms,
        forged_id,
        lanes.Lane().encoded(),
    ]
    assert await lanes.Scripts(pool).enqueue(keys=[get_settings().queue_name], args=args)
    assert await pool.exists(job_key_prefix + forged_id)
    await drain()
    assert not marker.exists(), "a forged Redis message executed code in the worker"
