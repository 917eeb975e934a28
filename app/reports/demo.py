"""Built-in demo report types (`demo.csv`, `demo.sleep`, `demo.flaky`, `demo.steps`) for newcomers and tests.

Registered only when ENABLE_DEMO_REPORTS is on.
"""

from __future__ import annotations

import asyncio
import csv
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field

from app.reports.base import PermanentError, ReportContext
from app.reports.registry import ReportRegistry, Step

CSV_CHUNK_ROWS = 20_000


class CsvParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rows: int = Field(ge=1, le=1_000_000, description="Number of data rows")
    delay_s: float = Field(0.0, ge=0, le=3600, description="Sleep before writing")
    empty: bool = Field(False, description="Write the header only: an empty report (0 rows)")


class SleepParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seconds: float = Field(ge=0, le=86400, description="How long to sleep")


class FlakyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fail_times: int = Field(ge=0, le=100, description="How many attempts fail before one succeeds")
    permanent: bool = Field(False, description="Fail with a permanent (non-retryable) error")


def _write_rows(fh: IO[Any], start: int, stop: int) -> None:
    writer = csv.writer(fh)
    writer.writerows((i, f"item-{i}", i * 7 % 1000) for i in range(start, stop))


async def demo_csv(ctx: ReportContext, params: CsvParams) -> None:
    """Writes a CSV with a header and `rows` data rows."""
    if params.delay_s:
        await asyncio.sleep(params.delay_s)
    with ctx.output(f"demo-{ctx.job_id}.csv", "text/csv") as fh:
        csv.writer(fh).writerow(["id", "name", "value"])
        ctx.set_rows(0 if params.empty else params.rows)
        if params.empty:
            return
        for start in range(1, params.rows + 1, CSV_CHUNK_ROWS):
            stop = min(start + CSV_CHUNK_ROWS, params.rows + 1)
            await asyncio.to_thread(_write_rows, fh, start, stop)
            ctx.set_progress((stop - 1) / params.rows)


async def demo_sleep(ctx: ReportContext, params: SleepParams) -> None:
    """Sleeps `seconds`, heartbeating, then writes a one-line text file (plus `scheduled_for` for a
    schedule's job)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + params.seconds
    while (left := deadline - loop.time()) > 0:
        await asyncio.sleep(min(left, 0.5))
        ctx.set_progress(1 - max(0.0, deadline - loop.time()) / params.seconds)
    with ctx.output("sleep.txt", "text/plain") as fh:
        fh.write(f"slept {params.seconds} s\n")
        if ctx.scheduled_for is not None:
            fh.write(f"scheduled_for {ctx.scheduled_for.isoformat()}\n")


async def demo_flaky(ctx: ReportContext, params: FlakyParams) -> None:
    """Fails its first `fail_times` attempts (retryable, or permanent), then succeeds."""
    if ctx.attempts_total <= params.fail_times:
        message = f"demo.flaky failing attempt {ctx.attempts_total} of {params.fail_times}"
        if params.permanent:
            raise PermanentError(message)
        raise RuntimeError(message)
    with ctx.output("flaky.txt", "text/plain") as fh:
        fh.write(f"succeeded on attempt {ctx.attempts_total}\n")


class StepsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fail_step: str | None = Field(None, description="generate, upload, notify or charge")
    fail_times: int = Field(1, ge=0, le=100, description="How many tries of fail_step fail")
    step_delay_s: float = Field(0.0, ge=0, le=60, description="Sleep in every step")


async def _demo_step(ctx: ReportContext, params: StepsParams) -> None:
    if params.step_delay_s:
        await asyncio.sleep(params.step_delay_s)
    if ctx.step_name == params.fail_step and ctx.step_attempt <= params.fail_times:
        raise RuntimeError(f"step {ctx.step_name} failing (try {ctx.step_attempt} of {params.fail_times})")
    if ctx.step_name == "upload":
        with ctx.output("steps.txt", "text/plain") as fh:
            fh.write(f"report of job {ctx.job_id}, uploaded on try {ctx.step_attempt}\n")


DEMO_STEPS = [
    Step("generate", "auto", _demo_step),
    Step("upload", "auto", _demo_step),
    Step("notify", "auto", _demo_step),
    Step("charge", "manual", _demo_step),
]


def register(registry: ReportRegistry) -> None:
    registry.report_type("demo.csv", params=CsvParams)(demo_csv)
    registry.report_type("demo.sleep", params=SleepParams)(demo_sleep)
    registry.report_type("demo.flaky", params=FlakyParams)(demo_flaky)
    registry.stepped_report_type(
        "demo.steps",
        params=StepsParams,
        steps=DEMO_STEPS,
        description="generate → upload → notify (auto) → charge (manual); fail_step fails fail_times tries",
    )
