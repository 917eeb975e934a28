"""The bench-only `bench.noop` report type: does nothing, so a run measures orchestration alone.

Enabled with REPORT_MODULES=bench.noop_report (the benchmark sets it for every process it starts).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from app.reports.base import ReportContext
from app.reports.registry import ReportRegistry

NOOP_TYPE = "bench.noop"


class NoopParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


async def noop(ctx: ReportContext, params: NoopParams) -> None:
    """Does nothing and writes no file (benchmark only)."""


def register(registry: ReportRegistry) -> None:
    registry.report_type(NOOP_TYPE, params=NoopParams)(noop)
