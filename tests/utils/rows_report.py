"""A test-only Python report type, `test.rows`, written with `ctx.rows_writer`: `rows` rows in the format the
job asks for (its `format` param). Loaded with REPORT_MODULES (or `registry.load`)."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.reports.base import ReportContext
from app.reports.registry import ReportRegistry


class RowsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rows: int = Field(ge=0, le=100_000)
    format: Literal["csv", "xlsx"] = "csv"


async def rows_report(ctx: ReportContext, params: RowsParams) -> None:
    """Rows of a day, an amount and a label, written by the shared rows writer."""
    start = date(2026, 1, 1)
    rows = ((i, start + timedelta(days=i % 365), Decimal(i) / 4, f"label {i}") for i in range(params.rows))
    async with ctx.rows_writer(
        ["n", "day", "amount", "label"], filename="rows", expected_rows=params.rows
    ) as out:
        await out.write_rows(rows)


def register(registry: ReportRegistry) -> None:
    registry.report_type("test.rows", params=RowsParams)(rows_report)
