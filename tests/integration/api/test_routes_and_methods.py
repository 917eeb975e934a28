"""The HTTP contract (CONTRACT.md) for routes and methods: unknown routes are 404 problem+json (401 under
/v1 without a key, also behind a root path), a wrong method 405 with an Allow header naming each method."""

from __future__ import annotations

from typing import Any

import httpx

from tests.utils.problems import BOGUS_ID, assert_problem


async def test_unknown_route_under_v1_is_404_problem_json(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    assert_problem(await client.get("/v1/nothing-here", headers=auth), 404)
    assert_problem(await client.get("/v1/jobs/a/b/c", headers=auth), 404)


async def test_unknown_route_under_v1_without_a_key_is_401(client: httpx.AsyncClient, env: Any) -> None:
    assert_problem(await client.get("/v1/nothing-here"), 401)


async def test_unknown_route_outside_v1_is_404_problem_json(client: httpx.AsyncClient, env: Any) -> None:
    assert_problem(await client.get("/nothing-here"), 404)
    assert_problem(await client.get("/v2/jobs"), 404)


async def test_wrong_method_is_405_problem_json(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    resp = await client.delete("/v1/jobs", headers=auth)
    assert_problem(resp, 405)
    assert resp.headers.get("allow")
    assert_problem(await client.put(f"/v1/jobs/{BOGUS_ID}", json={}, headers=auth), 405)
    assert_problem(await client.post("/healthz"), 405)


async def test_missing_key_behind_a_root_path_is_401(env: Any) -> None:
    from app.application import create_app

    transport = httpx.ASGITransport(app=create_app(), root_path="/api", raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        assert (await c.get("/api/healthz")).status_code == 200
        assert_problem(await c.get("/api/v1/jobs"), 401)


async def test_405_allow_header_lists_every_supported_method(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    resp = await client.delete("/v1/jobs", headers=auth)
    assert resp.status_code == 405
    allowed = {m.strip() for m in resp.headers.get("allow", "").split(",")}
    assert {"GET", "POST"} <= allowed
