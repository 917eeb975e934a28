"""Idempotency-Key semantics under concurrency, and tenant isolation, on real MariaDB."""

from __future__ import annotations

import asyncio

import httpx

from app.core.db import session_scope
from app.core.tenancy import EVERY_TENANT
from app.jobs.repository import JobRepository
from tests.utils.keys import make_key

BODY = {"report_type": "demo.csv", "params": {"rows": 10}}


async def test_twenty_concurrent_submits_with_one_key_create_one_job(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    headers = {**auth, "Idempotency-Key": "order-42"}
    responses = await asyncio.gather(
        *(client.post("/v1/jobs", json=BODY, headers=headers) for _ in range(20))
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 19 + [202], [r.text for r in responses if r.status_code not in (200, 202)]
    assert len({r.json()["id"] for r in responses}) == 1
    async with session_scope() as session:
        assert await JobRepository(session).count_jobs(EVERY_TENANT) == 1


async def test_same_key_with_a_different_body_is_409_and_changes_nothing(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    headers = {**auth, "Idempotency-Key": "k1"}
    first = await client.post("/v1/jobs", json=BODY, headers=headers)
    assert first.status_code == 202
    again = await client.post("/v1/jobs", json=BODY, headers=headers)
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    other = await client.post("/v1/jobs", json={**BODY, "params": {"rows": 11}}, headers=headers)
    assert other.status_code == 409
    assert other.headers["content-type"] == "application/problem+json"
    async with session_scope() as session:
        assert await JobRepository(session).count_jobs(EVERY_TENANT) == 1


async def test_idempotency_keys_are_scoped_per_tenant(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    other = await make_key("globex")
    a = await client.post("/v1/jobs", json=BODY, headers={**auth, "Idempotency-Key": "shared"})
    b = await client.post("/v1/jobs", json=BODY, headers={**other, "Idempotency-Key": "shared"})
    assert a.status_code == b.status_code == 202
    assert a.json()["id"] != b.json()["id"]


async def test_another_tenants_key_gets_404_for_the_job(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_id = (await client.post("/v1/jobs", json=BODY, headers=auth)).json()["id"]
    other = await make_key("globex")
    for path in (f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/attempts", f"/v1/jobs/{job_id}/output"):
        resp = await client.get(path, headers=other)
        assert resp.status_code == 404, (path, resp.text)
        assert resp.headers["content-type"] == "application/problem+json"
    listing = await client.get("/v1/jobs", headers=other)
    assert listing.json() == {"items": [], "next_cursor": None}
    assert (await client.get(f"/v1/jobs/{job_id}", headers=auth)).status_code == 200
