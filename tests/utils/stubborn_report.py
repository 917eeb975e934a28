"""A test-only report type, `test.stubborn`: it swallows cancellation and keeps going for `hold_s` seconds,
as a report stuck in code that ignores cancels would (registered for one test, then removed)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict, Field

from app.reports.base import ReportContext
from app.reports.registry import registry

NAME = "test.stubborn"


class StubbornParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hold_s: float = Field(ge=0, le=60)


async def stubborn(ctx: ReportContext, params: StubbornParams) -> None:
    until = time.monotonic() + params.hold_s
    while (left := until - time.monotonic()) > 0:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(left)
    raise RuntimeError("held on past its cancels")


@contextlib.contextmanager
def stubborn_type(timeout_s: float) -> Iterator[str]:
    registry.report_type(NAME, params=StubbornParams, timeout_s=timeout_s, max_attempts=1)(stubborn)
    try:
        yield NAME
    finally:
        registry._types.pop(NAME, None)  # the registry has no public way to forget a type: tests only
