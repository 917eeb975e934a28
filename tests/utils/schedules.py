"""Schedules through the API (asserting 201 and its Location), and jobs made as if a schedule fired."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import httpx

from app.core.db import session_scope
from app.core.ids import new_id
from app.core.states import JobStatus
from app.core.times import utcnow
from app.jobs.repository import JobRepository
from app.models import ReportJob

DAILY = {"name": "daily-sales", "report_type": "demo.csv", "params": {"rows": 10}, "cron": "0 8 * * *"}


async def create_schedule(
    client: httpx.AsyncClient, headers: Mapping[str, str], **fields: Any
) -> dict[str, Any]:
    """POST DAILY with `fields` over it; asserts 201 and Location; returns the schedule."""
    resp = await client.post("/v1/schedules", json={**DAILY, **fields}, headers=dict(headers))
    assert resp.status_code == 201, resp.text
    assert resp.headers["location"] == f"/v1/schedules/{resp.json()['id']}"
    return dict(resp.json())


async def insert_fired_job(tenant: str, schedule_id: str | None, scheduled_for: datetime | None) -> str:
    """A job row as a schedule's fire would make it (no queue involved); returns its id."""
    now = utcnow()
    job = ReportJob(
        id=new_id(),
        tenant=tenant,
        report_type="demo.csv",
        params={"rows": 1},
        status=JobStatus.PENDING,
        max_attempts=1,
        timeout_s=60,
        schedule_id=schedule_id,
        scheduled_for=scheduled_for,
        created_at=now,
        updated_at=now,
    )
    async with session_scope() as session:
        await JobRepository(session).add_job(job)
    return job.id


async def make_due(schedule_id: str, next_fire_at: datetime) -> None:
    """Move a schedule's next fire (as if every scheduler had been down since then)."""
    from app.models import Schedule

    async with session_scope() as session:
        row = await session.get(Schedule, schedule_id)
        assert row is not None
        row.next_fire_at = next_fire_at
        row.updated_at = utcnow()


async def schedule_row(schedule_id: str) -> Any:
    from app.models import Schedule

    async with session_scope() as session:
        return await session.get(Schedule, schedule_id, populate_existing=True)


async def fire_records(schedule_id: str) -> list[tuple[datetime, str, str | None, str | None]]:
    """(fire_time, result, reason, job_id) of every run record, oldest fire first."""
    from sqlmodel import col, select

    from app.models import ScheduleRun

    async with session_scope() as session:
        rows = (
            await session.execute(
                select(ScheduleRun)
                .where(col(ScheduleRun.schedule_id) == schedule_id)
                .order_by(col(ScheduleRun.fire_time))
            )
        ).scalars()
        return [(r.fire_time, r.result, r.reason, r.job_id) for r in rows]


async def schedule_jobs(schedule_id: str) -> list[ReportJob]:
    """The jobs a schedule made, oldest first."""
    from sqlmodel import col, select

    async with session_scope() as session:
        rows = await session.execute(
            select(ReportJob)
            .where(col(ReportJob.schedule_id) == schedule_id)
            .order_by(col(ReportJob.created_at), col(ReportJob.id))
        )
        return list(rows.scalars())
