"""The scheduler's periodic work, as plain async functions: reconcile Redis with MySQL.

Idempotent by construction: re-enqueueing uses the same arq job id, which Redis dedups.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from app import dead_letters, queue
from app.config import get_settings
from app.db import session_scope
from app.models import utcnow
from app.repository import Repository

RECONCILE_BATCH = 500


def grace_s() -> float:
    """A pending job or alert younger than this is probably being enqueued right now: leave it be."""
    return min(2.0, get_settings().scan_interval_s)


async def reconcile() -> int:
    now = utcnow()
    async with session_scope() as session:
        jobs = await Repository(session).jobs_due_for_enqueue(
            now, now - timedelta(seconds=grace_s()), RECONCILE_BATCH
        )
    enqueued = 0
    for job in jobs:
        if not await queue.is_queued(job.id, job.replay_count) and await queue.enqueue_run(
            job.id, job.replay_count
        ):
            enqueued += 1
    return enqueued


async def run_tick() -> dict[str, Any]:
    report: dict[str, Any] = {"reenqueued": await reconcile()}
    report["alerts_republished"] = await dead_letters.republish_pending(grace_s())
    report.update(await dead_letters.archive_and_purge())
    return report
