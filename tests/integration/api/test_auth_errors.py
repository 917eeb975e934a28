"""The HTTP contract (CONTRACT.md) for keys and scopes: a missing, garbage, Basic or revoked key is 401 and a
missing scope 403, both problem+json and both before any validation or lookup."""

from __future__ import annotations

from typing import Any

import httpx

from app.auth import service
from tests.utils.api_contract import CSV
from tests.utils.jobs import post_job
from tests.utils.keys import make_key
from tests.utils.problems import BOGUS_ID, assert_problem

# ---- 401 ------------------------------------------------------------------------------------------


async def test_missing_key_is_401_problem_json(client: httpx.AsyncClient, env: Any) -> None:
    resp = await client.get("/v1/jobs")
    assert_problem(resp, 401)
    assert resp.headers.get("www-authenticate", "").lower().startswith("bearer")


async def test_garbage_key_is_401_problem_json(client: httpx.AsyncClient, env: Any) -> None:
    for value in ("Bearer not-a-key", "Bearer ro_" + "x" * 43, "Bearer", "Bearer    ", "garbage"):
        assert_problem(await client.get("/v1/jobs", headers={"Authorization": value}), 401)


async def test_basic_scheme_is_401_problem_json(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    raw = auth["Authorization"].removeprefix("Bearer ")
    resp = await client.get("/v1/jobs", headers={"Authorization": f"Basic {raw}"})
    assert_problem(resp, 401)
    resp = await client.get("/v1/jobs", auth=("user", raw))
    assert_problem(resp, 401)


async def test_revoked_key_is_401_problem_json(client: httpx.AsyncClient, env: Any) -> None:
    key, raw = await service.create_api_key("acme", ["jobs:read", "jobs:write"])
    headers = {"Authorization": f"Bearer {raw}"}
    assert (await client.get("/v1/jobs", headers=headers)).status_code == 200
    assert await service.revoke_api_key(key.id) is True
    assert_problem(await client.get("/v1/jobs", headers=headers), 401)
    assert_problem(await client.post("/v1/jobs", json=CSV, headers=headers), 401)


async def test_missing_key_with_malformed_json_is_401_before_validation(
    client: httpx.AsyncClient, env: Any
) -> None:
    resp = await client.post("/v1/jobs", content=b"{not json", headers={"Content-Type": "application/json"})
    assert_problem(resp, 401)


async def test_bad_key_on_an_unknown_job_is_401_not_404(client: httpx.AsyncClient, env: Any) -> None:
    resp = await client.get(f"/v1/jobs/{BOGUS_ID}", headers={"Authorization": "Bearer nope"})
    assert_problem(resp, 401)


# ---- 403 ------------------------------------------------------------------------------------------


async def test_read_only_key_posting_a_job_is_403(client: httpx.AsyncClient, env: Any) -> None:
    reader = await make_key("acme", "jobs:read")
    assert_problem(await client.post("/v1/jobs", json=CSV, headers=reader), 403)


async def test_read_only_key_posting_malformed_json_is_403_before_validation(
    client: httpx.AsyncClient, env: Any
) -> None:
    reader = await make_key("acme", "jobs:read")
    resp = await client.post(
        "/v1/jobs", content=b"{not json", headers={**reader, "Content-Type": "application/json"}
    )
    assert_problem(resp, 403)


async def test_write_only_key_reading_a_job_is_403(client: httpx.AsyncClient, env: Any) -> None:
    writer = await make_key("acme", "jobs:write")
    job = await post_job(client, writer, CSV)
    assert_problem(await client.get(f"/v1/jobs/{job['id']}", headers=writer), 403)
    assert_problem(await client.get("/v1/jobs", headers=writer), 403)
    # Missing scope is 403 before any lookup: an unknown id is 403 too, not 404.
    assert_problem(await client.get(f"/v1/jobs/{BOGUS_ID}", headers=writer), 403)
