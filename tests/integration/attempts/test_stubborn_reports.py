"""A report that ignores its cancel cannot keep its attempt unburnt: past its time limit and a short grace
it is left behind and the attempt is recorded as timed out, long before arq's own limit would drop its
message."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from app.attempts import runner
from tests.utils.jobs import get_attempts, submit_id, wait_job
from tests.utils.stubborn_report import stubborn_type
from tests.utils.workers import build_worker


async def test_a_report_that_ignores_its_cancel_times_out_and_burns_its_attempt(
    client: httpx.AsyncClient, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "CANCEL_GRACE_S", 0.5, raising=False)
    with stubborn_type(timeout_s=0.5) as name:
        job_id = await submit_id(client, auth, name, hold_s=6)
        # arq's own limit, here 2 s (normally 60 s above every report's timeout), ends the delivery.
        worker = build_worker(burst=False, job_timeout=2)
        running = asyncio.create_task(worker.main())
        try:
            job = await wait_job(client, auth, job_id, within_s=12)
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            await worker.close()
    assert job["status"] == "dead" and job["last_error"]["type"] == "TimeoutError", job
    assert [a["outcome"] for a in await get_attempts(client, auth, job_id)] == ["timed_out"]
