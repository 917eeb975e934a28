"""A report type the browser tests load through REPORT_MODULES (the way deployments add theirs).

`browser.lookup` fails permanently with an error that quotes its free-text param, as real reports do
("customer … not found"): the one path by which text a tenant typed reaches a job's error unchanged.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from app.reports.base import PermanentError, ReportContext
from app.reports.registry import ReportRegistry


class LookupParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    customer: str = Field(min_length=1, max_length=500, description="Free text, quoted in the error")


async def lookup(ctx: ReportContext, params: LookupParams) -> None:
    """Looks a customer up; there is none, and the error says which one was asked for."""
    raise PermanentError(f"customer {params.customer} not found")


def register(registry: ReportRegistry) -> None:
    registry.report_type("browser.lookup", params=LookupParams)(lookup)
