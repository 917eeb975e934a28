"""The oldest-eligible gauge and the queue-wait histogram start a job's wait at the same moment: the SQL
rule (the computed `eligible_at` column, app/models.py) gives what app.jobs.waiting.eligible_since gives."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from tests.utils.jobs import submit_id

NOW = datetime.now(UTC)
EARLIER = NOW - timedelta(minutes=10)
LATER = NOW - timedelta(minutes=2)


async def set_row(job_id: str, **values: Any) -> None:
    from app.core.db import session_scope

    assignments = ", ".join(f"{k} = :{k}" for k in values)
    params = {k: v.replace(tzinfo=None) if isinstance(v, datetime) else v for k, v in values.items()}
    async with session_scope() as session:
        await session.execute(
            text(f"UPDATE report_jobs SET {assignments} WHERE id = :id"), {**params, "id": job_id}
        )


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"status": "pending", "updated_at": EARLIER, "run_at": None}, EARLIER),
        ({"status": "pending", "updated_at": EARLIER, "run_at": LATER}, LATER),
        ({"status": "pending", "updated_at": LATER, "run_at": EARLIER}, LATER),
        ({"status": "scheduled", "updated_at": EARLIER, "run_at": LATER}, LATER),
        ({"status": "retrying", "updated_at": EARLIER, "next_attempt_at": LATER}, LATER),
    ],
)
async def test_sql_and_python_agree_on_when_a_wait_began(
    client: httpx.AsyncClient, auth: dict[str, str], row: dict[str, Any], expected: datetime
) -> None:
    from app.core.db import session_scope
    from app.core.tenancy import EVERY_TENANT
    from app.jobs.repository import JobRepository
    from app.jobs.waiting import eligible_since
    from app.observability.repository import StateRepository

    job_id = await submit_id(client, auth, "demo.csv", rows=1)
    await set_row(job_id, **row)
    async with session_scope() as session:
        job = await JobRepository(session).get_job(job_id, EVERY_TENANT)
        [live] = await StateRepository(session).live_jobs(NOW)
    assert job is not None
    assert eligible_since(job) == expected
    assert live.oldest_eligible_since == expected


async def test_a_job_behind_its_predecessor_or_not_yet_due_is_not_eligible(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    from app.core.db import session_scope
    from app.observability.repository import StateRepository

    blocked = await submit_id(client, auth, "demo.csv", rows=1)
    await set_row(blocked, blocked_by="01JB0000000000000000000000")
    retrying = await submit_id(client, auth, "demo.csv", rows=1)
    await set_row(retrying, status="retrying", next_attempt_at=NOW + timedelta(minutes=1))
    async with session_scope() as session:
        rows = await StateRepository(session).live_jobs(NOW)
    assert sorted((r.status, r.count) for r in rows) == [("pending", 1), ("retrying", 1)]
    assert all(r.oldest_eligible_since is None for r in rows)
