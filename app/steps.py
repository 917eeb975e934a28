"""Runs a multi-step report inside one attempt: skip succeeded steps, run the rest in order, record each.

An `auto` step failure makes the attempt fail (retried by the job's rules); a `manual` step is tried at most
once automatically and its failure sends the job to `dead`, naming the step, until an operator replays it.
"""

from __future__ import annotations

from typing import Any

from app import service
from app.reports.base import PermanentError, ReportContext
from app.reports.registry import ReportType
from app.repository import AttemptKey
from app.states import StepStatus


async def run_steps(ctx: ReportContext, params: Any, rtype: ReportType, key: AttemptKey) -> None:
    rows = {row.name: row for row in await service.load_steps(key.job_id, rtype.steps)}
    for step in rtype.steps:
        row = rows[step.name]
        if row.status == StepStatus.SUCCEEDED:
            continue
        if step.mode == "manual" and row.attempts >= 1 and not row.rerun_allowed:
            raise PermanentError(
                f"manual step {step.name!r} was already tried once; replay it with "
                f'{{"steps": ["{step.name}"]}} once its cause is fixed'
            )
        attempt = await service.step_started(key.job_id, step.name)
        ctx.step_name, ctx.step_attempt = step.name, attempt
        ctx.output_info = None
        try:
            await step.fn(ctx, params)
        except Exception as exc:
            error = service.error_dict(
                type(exc).__name__,
                f"step {step.name}: {exc}",
                retryable=step.mode == "auto" and not isinstance(exc, PermanentError),
            )
            await service.step_finished(key.job_id, step.name, StepStatus.FAILED, error)
            if step.mode == "manual" or isinstance(exc, PermanentError):
                raise PermanentError(f"{step.mode} step {step.name!r} failed: {exc}") from exc
            raise RuntimeError(f"step {step.name!r} failed: {exc}") from exc
        if ctx.output_info is not None:
            await service.record_output(key, ctx.output_info)
        await service.step_finished(key.job_id, step.name, StepStatus.SUCCEEDED, None)
    ctx.step_name = None
    ctx.output_info = None  # recorded step by step already
