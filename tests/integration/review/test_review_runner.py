"""Hostile review of the runner's bounded cancel (cc613f6): a report that ignores its cancel is left behind,
its attempt settled as timed out, and the job's next attempt is free to start at once."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, ConfigDict

from app.attempts import runner
from app.reports.base import ReportContext
from app.reports.registry import registry
from tests.utils.jobs import get_attempts, submit_id, wait_job
from tests.utils.workers import build_worker

NAME = "test.review_stubborn"
live: dict[str, int] = {}  # job id -> how many runs of its report code are executing right now
peak: dict[str, int] = {}


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hold_s: float


async def stubborn(ctx: ReportContext, params: Params) -> None:
    """Swallows cancels (a report stuck in a C call, a `finally` that awaits, a library that retries on
    CancelledError) and keeps doing its work -- writing to the customer's ledger, say -- for `hold_s`."""
    live[ctx.job_id] = live.get(ctx.job_id, 0) + 1
    peak[ctx.job_id] = max(peak.get(ctx.job_id, 0), live[ctx.job_id])
    try:
        until = time.monotonic() + params.hold_s
        while (left := until - time.monotonic()) > 0:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(left)
    finally:
        live[ctx.job_id] -= 1
    raise RuntimeError("held on past its cancels")


async def test_an_attempt_left_behind_never_runs_beside_the_next_attempt_of_its_job(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attempt 1 outlives its time limit and ignores the cancel; after CANCEL_GRACE_S the runner records it
    timed out and the delivery ends (slot freed, message back for the backoff), while its report code is still
    running in the worker. Attempt 2 starts 0.2 s later: two attempts of one job executing at once (and
    the type's concurrency cap, which counts slots, no longer counts the one left behind)."""
    monkeypatch.setattr(runner, "CANCEL_GRACE_S", 0.3)
    registry.report_type(NAME, params=Params, timeout_s=0.5, max_attempts=2)(stubborn)
    try:
        job_id = await submit_id(client, auth, NAME, hold_s=3)
        worker = build_worker(burst=False, max_jobs=4)
        running = asyncio.create_task(worker.main())
        try:
            await wait_job(client, auth, job_id, within_s=20)
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            await worker.close()
    finally:
        registry._types.pop(NAME, None)
    outcomes = [a["outcome"] for a in await get_attempts(client, auth, job_id)]
    assert outcomes == ["timed_out", "timed_out"], outcomes
    assert peak[job_id] == 1, f"{peak[job_id]} runs of {job_id}'s report executing at once"
