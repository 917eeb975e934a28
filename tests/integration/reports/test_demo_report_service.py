"""`make run`'s demo report service against the example declarations: it refuses an unsigned call, and the
sync example type ends `done` with the CSV it renders (its rows counted)."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.utils.http_reports import demo_service, example_types, register_http_type
from tests.utils.jobs import submit_id, wait_job
from tests.utils.workers import drain


@pytest.fixture
async def demo_port(env: Any, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[int]:
    await env.set(
        HTTP_REPORT_ALLOWED_HOSTS="127.0.0.1", DEMO_REPORT_SERVICE_SECRET="demo-secret-for-the-tests"
    )
    with demo_service() as port:
        for rtype in example_types(port):
            register_http_type(monkeypatch, rtype)
        yield port


async def test_the_demo_service_refuses_an_unsigned_call(demo_port: int) -> None:
    async with httpx.AsyncClient(trust_env=False) as peer:
        resp = await peer.post(f"http://127.0.0.1:{demo_port}/reports/sales/north", json={"params": {}})
    assert resp.status_code == 401


async def test_the_sync_example_ends_done_with_the_demo_services_csv(
    client: httpx.AsyncClient, auth: dict[str, str], demo_port: int
) -> None:
    job_id = await submit_id(client, auth, "demo.http.sales", region="east", rows=25)
    await drain()
    job = await wait_job(client, auth, job_id)
    assert job["status"] == "done", job
    assert job["output"]["filename"] == "sales-east.csv"
    resp = await client.get(f"/v1/jobs/{job_id}/output", headers=auth)
    rows = list(csv.DictReader(io.StringIO(resp.text)))
    assert len(rows) == 25 and {r["region"] for r in rows} == {"east"}
