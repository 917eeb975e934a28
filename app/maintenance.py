"""The scheduler's periodic work, as plain async functions: reconcile Redis with MySQL.

Idempotent by construction: re-enqueueing uses the same arq job id, which Redis dedups.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from app import queue
from app.db import session_scope
from app.models import utcnow
from app.repository import Repository

RECONCILE_BATCH = 500
# A pending job younger than this is probably being enqueued by the API right now.
PENDING_GRACE_S = 2.0


async def reconcile() -> int:
    now = utcnow()
    async with session_scope() as session:
        jobs = await Repository(session).jobs_due_for_enqueue(
            now, now - timedelta(seconds=PENDING_GRACE_S), RECONCILE_BATCH
        )
    enqueued = 0
    for job in jobs:
        if not await queue.is_queued(job.id, job.replay_count) and await queue.enqueue_run(
            job.id, job.replay_count
        ):
            enqueued += 1
    return enqueued


async def run_tick() -> dict[str, Any]:
    return {"reenqueued": await reconcile()}
