"""A test-only report type, `test.big_csv`: demo.csv's columns with a padded name, written until the file
reaches `megabytes` (demo.csv stops at 1,000,000 rows, about 22 MB). Loaded with REPORT_MODULES."""

from __future__ import annotations

import asyncio
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field

from app.reports.base import ReportContext
from app.reports.registry import ReportRegistry

CHUNK_ROWS = 4096
PAD = "x" * 200


class BigCsvParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    megabytes: int = Field(ge=1, le=1024)


def _write_chunk(fh: IO[Any], start: int) -> None:
    fh.write("".join(f"{i},item-{i}-{PAD},{i * 7 % 1000}\r\n" for i in range(start, start + CHUNK_ROWS)))


async def big_csv(ctx: ReportContext, params: BigCsvParams) -> None:
    target_bytes = params.megabytes * 1024 * 1024
    with ctx.output(f"big-{ctx.job_id}.csv", "text/csv") as fh:
        fh.write("id,name,value\r\n")
        start = 1
        while fh.tell() < target_bytes:
            await asyncio.to_thread(_write_chunk, fh, start)
            start += CHUNK_ROWS
            ctx.set_progress(min(1.0, fh.tell() / target_bytes))


def register(registry: ReportRegistry) -> None:
    registry.report_type("test.big_csv", params=BigCsvParams)(big_csv)
