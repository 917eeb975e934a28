"""What refused and forged requests aim at and must leave alone: a job body, a dead job with its letter, and
the job's stored row with its dead letters, to compare before and after."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import text

from app.core.db import session_scope
from app.core.tenancy import EVERY_TENANT
from app.jobs.repository import JobRepository
from tests.utils.dead_letters import kill_permanently

CSV = {"report_type": "demo.csv", "params": {"rows": 3}}


async def dead_job(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    """A job that dies on its first attempt (permanent error) and leaves a dead letter."""
    [job_id] = await kill_permanently(client, headers)
    return job_id


async def job_state(job_id: str) -> dict[str, Any]:
    """The job row and its dead letters as stored: what a forbidden request must not change."""
    async with session_scope() as session:
        job = await JobRepository(session).get_job(job_id, EVERY_TENANT)
        letters = (
            await session.execute(
                text("SELECT id, replayed_at, archived_at FROM dead_letters WHERE job_id = :j ORDER BY id"),
                {"j": job_id},
            )
        ).all()
    assert job is not None
    return {
        "status": job.status,
        "attempt": job.attempt,
        "replay_count": job.replay_count,
        "attempts_total": job.attempts_total,
        "cancel_requested": job.cancel_requested,
        "updated_at": job.updated_at,
        "finished_at": job.finished_at,
        "letters": [tuple(row) for row in letters],
    }
