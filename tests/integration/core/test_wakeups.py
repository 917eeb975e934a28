"""Idle workers are woken, not polled: with a 30 s poll delay, only the wake-ups can explain these timings.

On enqueue (a Redis message), when a deferred job comes due (a timer), and when a job frees a slot.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.utils.workers import drain

POLL_DELAY_S = 30  # a worker that only polled would not pick anything up within these tests' waits


async def idle_worker(**overrides: Any) -> asyncio.Task[None]:
    task = asyncio.create_task(drain(burst=False, poll_delay=POLL_DELAY_S, timeout_s=60, **overrides))
    await asyncio.sleep(0.5)  # its first poll found the queue empty; from now on it sleeps 30 s between polls
    return task


async def wait_done(client: httpx.AsyncClient, auth: dict[str, str], job_id: str) -> dict[str, Any]:
    resp = await client.get(f"/v1/jobs/{job_id}", params={"wait": 10}, headers=auth)
    return dict(resp.json())


async def test_an_idle_worker_is_woken_by_the_enqueue(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    worker = await idle_worker()
    try:
        job = (
            await client.post(
                "/v1/jobs", headers=auth, json={"report_type": "demo.csv", "params": {"rows": 1}}
            )
        ).json()
        assert (await wait_done(client, auth, job["id"]))["status"] == "done"
    finally:
        worker.cancel()


async def test_a_deferred_job_wakes_the_worker_when_it_comes_due(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    worker = await idle_worker()
    try:
        run_at = datetime.now(UTC) + timedelta(seconds=1.5)
        job = (
            await client.post(
                "/v1/jobs",
                headers=auth,
                json={"report_type": "demo.csv", "params": {"rows": 1}, "run_at": run_at.isoformat()},
            )
        ).json()
        assert (await wait_done(client, auth, job["id"]))["status"] == "done"
    finally:
        worker.cancel()
    attempts = (await client.get(f"/v1/jobs/{job['id']}/attempts", headers=auth)).json()
    assert datetime.fromisoformat(attempts[0]["started_at"].replace("Z", "+00:00")) >= run_at


async def test_a_retry_backoff_wakes_the_worker_when_it_ends(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    worker = await idle_worker()
    try:
        job = (
            await client.post(
                "/v1/jobs", headers=auth, json={"report_type": "demo.flaky", "params": {"fail_times": 2}}
            )
        ).json()
        body = await wait_done(client, auth, job["id"])
    finally:
        worker.cancel()
    assert body["status"] == "done" and body["attempt"] == 3


async def test_a_worker_takes_the_next_job_as_soon_as_one_frees_its_slot(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    ids = [
        (
            await client.post(
                "/v1/jobs", headers=auth, json={"report_type": "demo.sleep", "params": {"seconds": 0.2}}
            )
        ).json()["id"]
        for _ in range(4)
    ]
    worker = await idle_worker(max_jobs=1)  # one slot: each later job waits for the one before it
    try:
        assert (await wait_done(client, auth, ids[-1]))["status"] == "done"
    finally:
        worker.cancel()
