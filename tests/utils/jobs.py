"""Submitting jobs through the API and reading them back, asserting the expected status codes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import httpx

#: Request headers; None for a client that already carries its key.
Headers = Mapping[str, str] | None

TERMINAL = frozenset({"done", "dead", "cancelled"})


def parse_ts(value: str) -> datetime:
    """A timestamp as the API writes it (ISO 8601, possibly with a trailing Z)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def post_job(client: httpx.AsyncClient, headers: Headers, body: Mapping[str, Any]) -> dict[str, Any]:
    """POST a whole job body; asserts 202 and its Location header; returns the job."""
    resp = await client.post("/v1/jobs", json=dict(body), headers=headers)
    assert resp.status_code == 202, resp.text
    assert resp.headers["location"] == f"/v1/jobs/{resp.json()['id']}"
    return dict(resp.json())


async def submit(
    client: httpx.AsyncClient,
    headers: Headers,
    report_type: str,
    /,
    *,
    job: Mapping[str, Any] | None = None,
    **params: Any,
) -> dict[str, Any]:
    """Submit `report_type` with `params`; `job` adds top-level fields (max_attempts, ordering_key, …)."""
    return await post_job(client, headers, {"report_type": report_type, "params": params, **(job or {})})


async def submit_id(
    client: httpx.AsyncClient,
    headers: Headers,
    report_type: str,
    /,
    *,
    job: Mapping[str, Any] | None = None,
    **params: Any,
) -> str:
    """Like `submit`, returning only the job id."""
    return str((await submit(client, headers, report_type, job=job, **params))["id"])


async def get_job(client: httpx.AsyncClient, headers: Headers, job_id: str) -> dict[str, Any]:
    resp = await client.get(f"/v1/jobs/{job_id}", headers=headers)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def get_attempts(client: httpx.AsyncClient, headers: Headers, job_id: str) -> list[dict[str, Any]]:
    resp = await client.get(f"/v1/jobs/{job_id}/attempts", headers=headers)
    assert resp.status_code == 200, resp.text
    return list(resp.json())


async def submit_many(
    client: httpx.AsyncClient, headers: Headers, bodies: Sequence[Mapping[str, Any]], concurrency: int = 16
) -> list[str]:
    """Submit every body (at most `concurrency` in flight); returns the job ids in the bodies' order."""
    sem = asyncio.Semaphore(concurrency)

    async def one(body: Mapping[str, Any]) -> str:
        async with sem:
            return str((await post_job(client, headers, body))["id"])

    return list(await asyncio.gather(*(one(b) for b in bodies)))


async def wait_job(
    client: httpx.AsyncClient,
    headers: Headers,
    job_id: str,
    statuses: Iterable[str] = TERMINAL,
    within_s: float = 30,
) -> dict[str, Any]:
    """Poll until the job's status is one of `statuses`; returns the job."""
    wanted = set(statuses)
    deadline = time.monotonic() + within_s
    while True:
        job = await get_job(client, headers, job_id)
        if job["status"] in wanted:
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} still {job['status']} after {within_s:g} s: {job}")
        await asyncio.sleep(0.05)


async def cancel(client: httpx.AsyncClient, headers: Headers, job_id: str) -> dict[str, Any]:
    """POST …/cancel; asserts 202; returns the job as the answer shows it."""
    resp = await client.post(f"/v1/jobs/{job_id}/cancel", headers=headers)
    assert resp.status_code == 202, resp.text
    return dict(resp.json())
