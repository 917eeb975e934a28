"""The HTTP contract (CONTRACT.md) for one job by id: unknown, hostile or oversized ids and another tenant's
job are the same 404 problem+json (admin excepted), and the output before done is 409."""

from __future__ import annotations

import httpx

from tests.utils.api_contract import CSV, all_jobs
from tests.utils.jobs import post_job
from tests.utils.keys import make_key
from tests.utils.problems import BOGUS_ID, assert_problem

# ---- 404 ------------------------------------------------------------------------------------------


async def test_unknown_job_id_is_404_problem_json(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    for suffix in ("", "/attempts", "/output"):
        assert_problem(await client.get(f"/v1/jobs/{BOGUS_ID}{suffix}", headers=auth), 404)


async def test_path_traversal_id_is_404_problem_json(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    for path in (
        "/v1/jobs/..%2F..%2Fetc%2Fpasswd",
        "/v1/jobs/..%2F..%2Fetc%2Fpasswd/output",
        "/v1/jobs/%2E%2E",
    ):
        resp = await client.get(path, headers=auth)
        body = assert_problem(resp, 404)
        assert "root:" not in resp.text and "passwd" not in body["title"]


async def test_10kb_id_is_404_problem_json(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    long_id = "A" * 10_000
    for suffix in ("", "/attempts", "/output"):
        resp = await client.get(f"/v1/jobs/{long_id}{suffix}", headers=auth)
        assert_problem(resp, 404)


async def test_10kb_id_is_a_short_problem_json_never_a_500(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    long_id = "A" * 10_000
    for suffix in ("", "/attempts", "/output"):
        resp = await client.get(f"/v1/jobs/{long_id}{suffix}", headers=auth)
        assert resp.status_code in (404, 422), resp.text
        assert_problem(resp, resp.status_code)
        assert len(resp.content) < 2000 and long_id not in resp.text


async def test_any_non_ulid_id_up_to_200_chars_is_404(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    for job_id in ("A" * 27, "A" * 200, "not-a-ulid", "0" * 25):
        assert_problem(await client.get(f"/v1/jobs/{job_id}", headers=auth), 404)


async def test_unicode_id_is_404_problem_json(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    for job_id in ("日本語", "01JD3Z7Q8J5Q0V6W2XKX4N9M1é", "\U0001f4a5"):
        assert_problem(await client.get(f"/v1/jobs/{job_id}", headers=auth), 404)


async def test_lowercase_id_of_an_existing_job_is_not_an_error_500(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job = await post_job(client, auth, CSV)
    resp = await client.get(f"/v1/jobs/{job['id'].lower()}", headers=auth)
    assert resp.status_code in (200, 404), resp.text


# ---- tenants ----------------------------------------------------------------------------------------


async def test_job_of_another_tenant_is_404_everywhere(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job = await post_job(client, auth, CSV)
    other = await make_key("globex", "jobs:read,jobs:write")
    for suffix in ("", "/attempts", "/output"):
        assert_problem(await client.get(f"/v1/jobs/{job['id']}{suffix}", headers=other), 404)
    resp = await client.get(f"/v1/jobs/{job['id']}", params={"wait": 0.1}, headers=other)
    assert_problem(resp, 404)
    assert await all_jobs(client, other) == []
    assert [j["id"] for j in await all_jobs(client, auth)] == [job["id"]]


async def test_not_found_for_another_tenant_looks_like_a_missing_job(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    """Existence is not revealed: same status, title and body shape as an id that was never created."""
    job = await post_job(client, auth, CSV)
    other = await make_key("globex", "jobs:read")
    theirs = assert_problem(await client.get(f"/v1/jobs/{job['id']}", headers=other), 404)
    missing = assert_problem(await client.get(f"/v1/jobs/{BOGUS_ID}", headers=other), 404)
    assert theirs["title"] == missing["title"] and theirs["type"] == missing["type"]
    assert theirs["detail"].replace(job["id"], "ID") == missing["detail"].replace(BOGUS_ID, "ID")


async def test_admin_key_of_another_tenant_sees_the_job(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job = await post_job(client, auth, CSV)
    admin = await make_key("ops", "admin")
    resp = await client.get(f"/v1/jobs/{job['id']}", headers=admin)
    assert resp.status_code == 200 and resp.json()["id"] == job["id"]
    assert (await client.get(f"/v1/jobs/{job['id']}/attempts", headers=admin)).json() == []
    assert [j["id"] for j in await all_jobs(client, admin)] == [job["id"]]


# ---- 409 ------------------------------------------------------------------------------------------


async def test_output_before_done_is_409_problem_json(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job = await post_job(client, auth, CSV)
    assert job["status"] == "pending" and job["output"] is None
    assert_problem(await client.get(f"/v1/jobs/{job['id']}/output", headers=auth), 409)
