"""Runs a multi-step report inside one attempt: skip succeeded steps, run the rest in order, record each.

An `auto` step failure makes the attempt fail (retried by the job's rules); a `manual` step is tried at most
once automatically and its failure sends the job to `dead`, naming the step, until an operator replays it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.attempts.service import error_dict, record_output
from app.core.db import session_scope
from app.core.states import AttemptKey, StepStatus
from app.core.times import utcnow
from app.jobs.step_repository import StepRepository
from app.models import JobStep
from app.reports.base import PermanentError, ReportContext
from app.reports.registry import ReportType, Step


async def load_steps(job_id: str, steps: Sequence[Step]) -> list[JobStep]:
    """The job's step rows, created on its first attempt."""
    async with session_scope() as session:
        repo = StepRepository(session)
        rows = await repo.list_steps(job_id)
        known = {row.name for row in rows}
        missing = [
            JobStep(job_id=job_id, position=i, name=step.name, mode=step.mode)
            for i, step in enumerate(steps)
            if step.name not in known
        ]
        if missing:
            await repo.add_steps(missing)
            rows = await repo.list_steps(job_id)
    return rows


async def step_started(job_id: str, name: str) -> int:
    """Mark a step running (its try count goes up first, so a crash mid-step still counts the try)."""
    async with session_scope() as session:
        repo = StepRepository(session)
        [row] = [r for r in await repo.list_steps(job_id) if r.name == name]
        await repo.update_step(
            job_id,
            name,
            {
                "status": StepStatus.RUNNING.value,
                "attempts": row.attempts + 1,
                "rerun_allowed": False,
                "started_at": utcnow(),
                "finished_at": None,
            },
        )
    return row.attempts + 1


async def step_finished(job_id: str, name: str, status: StepStatus, error: dict[str, Any] | None) -> None:
    async with session_scope() as session:
        await StepRepository(session).update_step(
            job_id, name, {"status": status.value, "last_error": error, "finished_at": utcnow()}
        )


async def run_steps(ctx: ReportContext, params: Any, rtype: ReportType, key: AttemptKey) -> None:
    rows = {row.name: row for row in await load_steps(key.job_id, rtype.steps)}
    for step in rtype.steps:
        row = rows[step.name]
        if row.status == StepStatus.SUCCEEDED:
            continue
        if step.mode == "manual" and row.attempts >= 1 and not row.rerun_allowed:
            raise PermanentError(
                f"manual step {step.name!r} was already tried once; replay it with "
                f'{{"steps": ["{step.name}"]}} once its cause is fixed'
            )
        attempt = await step_started(key.job_id, step.name)
        ctx.step_name, ctx.step_attempt = step.name, attempt
        ctx.output_info = None
        try:
            await step.fn(ctx, params)
            await ctx.publish()  # uploaded before the job names it; an outage fails the step
        except Exception as exc:
            error = error_dict(
                type(exc).__name__,
                f"step {step.name}: {exc}",
                retryable=step.mode == "auto" and not isinstance(exc, PermanentError),
            )
            await step_finished(key.job_id, step.name, StepStatus.FAILED, error)
            if step.mode == "manual" or isinstance(exc, PermanentError):
                raise PermanentError(f"{step.mode} step {step.name!r} failed: {exc}") from exc
            raise RuntimeError(f"step {step.name!r} failed: {exc}") from exc
        if ctx.output_info is not None:
            await record_output(key, ctx.output_info)
        await step_finished(key.job_id, step.name, StepStatus.SUCCEEDED, None)
    ctx.step_name = None
    ctx.output_info = None  # recorded step by step already
