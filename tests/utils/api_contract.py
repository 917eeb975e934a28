"""Shared pieces of the HTTP contract tests (tests/integration/api): a valid job body, a tenant's whole job
list, the check that a refused request created no job, and timestamps as the API takes them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx

CSV = {"report_type": "demo.csv", "params": {"rows": 5}}


async def all_jobs(client: httpx.AsyncClient, headers: dict[str, str]) -> list[dict[str, Any]]:
    resp = await client.get("/v1/jobs", params={"limit": 200}, headers=headers)
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


def iso(value: datetime) -> str:
    return value.isoformat()


async def assert_no_job_created(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    assert await all_jobs(client, auth) == []
