"""Hostile-input limits: bounded params, per-tenant submit rate limit (429 + Retry-After)."""

from __future__ import annotations

from typing import Any

import httpx

from app.core.db import session_scope
from app.core.tenancy import EVERY_TENANT
from app.jobs.repository import JobRepository
from tests.utils.keys import make_key


async def count_jobs() -> int:
    async with session_scope() as session:
        return await JobRepository(session).count_jobs(EVERY_TENANT)


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


async def test_deeply_nested_params_are_422_with_the_field(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    resp = await client.post(
        "/v1/jobs", headers=auth, json={"report_type": "demo.csv", "params": {"rows": 1, "x": nested(20)}}
    )
    assert resp.status_code == 422
    assert resp.json()["errors"][0]["type"] == "too_deep"
    assert resp.json()["errors"][0]["loc"][:3] == ["body", "params", "x"]
    assert await count_jobs() == 0


async def test_huge_strings_and_too_many_values_in_params_are_422(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(MAX_BODY_BYTES=1_000_000)
    big = await client.post(
        "/v1/jobs", headers=auth, json={"report_type": "demo.csv", "params": {"rows": 1, "s": "x" * 20_000}}
    )
    assert big.status_code == 422 and big.json()["errors"][0]["type"] == "string_too_long"
    many = await client.post(
        "/v1/jobs",
        headers=auth,
        json={"report_type": "demo.csv", "params": {"rows": 1, "l": list(range(5000))}},
    )
    assert many.status_code == 422 and many.json()["errors"][0]["type"] == "too_many"
    assert await count_jobs() == 0


async def test_submit_rate_limit_answers_429_with_retry_after_per_tenant(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(SUBMIT_RATE_LIMIT_PER_MINUTE=3)
    body = {"report_type": "demo.csv", "params": {"rows": 1}}
    statuses = [(await client.post("/v1/jobs", json=body, headers=auth)).status_code for _ in range(3)]
    assert statuses == [202, 202, 202]
    limited = await client.post("/v1/jobs", json=body, headers=auth)
    assert limited.status_code == 429
    assert limited.headers["content-type"] == "application/problem+json"
    assert 1 <= int(limited.headers["retry-after"]) <= 60
    other = await make_key("globex")
    assert (await client.post("/v1/jobs", json=body, headers=other)).status_code == 202
    assert await count_jobs() == 4


async def test_rate_limit_is_off_by_default(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    body = {"report_type": "demo.csv", "params": {"rows": 1}}
    statuses = {(await client.post("/v1/jobs", json=body, headers=auth)).status_code for _ in range(30)}
    assert statuses == {202}
