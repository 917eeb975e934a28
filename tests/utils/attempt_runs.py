"""Attempts as MySQL recorded them, read in-process (the e2e tests read them through their stack): who ran
when, for the checks of tests/utils/fair_share_runs (how many ran at once).
"""

from __future__ import annotations

from sqlalchemy import select

from app.core.db import session_scope
from app.models import JobAttempt, ReportJob
from tests.utils.fair_share_runs import Start


async def attempt_runs(report_type: str | None = None) -> list[Start]:
    """Every attempt that started (of `report_type`, if given), in start order."""
    stmt = (
        select(
            ReportJob.id,
            ReportJob.tenant,
            ReportJob.report_type,
            ReportJob.priority,
            JobAttempt.started_at,
            JobAttempt.finished_at,
        )
        .join(JobAttempt, JobAttempt.job_id == ReportJob.id)  # type: ignore[arg-type]
        .order_by(JobAttempt.started_at, JobAttempt.id)  # type: ignore[arg-type]
    )
    if report_type is not None:
        stmt = stmt.where(ReportJob.report_type == report_type)
    async with session_scope() as session:
        rows = (await session.execute(stmt)).all()
    return [Start(*row) for row in rows]
