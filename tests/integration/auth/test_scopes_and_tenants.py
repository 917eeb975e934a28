"""Replay, cancel and bulk replay need their scope (403 before any lookup) and the job's tenant (404, nothing
changed); dead letters stay within their tenant, admin reaches all, and tenant names are plain slugs."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.core.errors import ValidationFailed
from tests.utils.jobs import submit_id
from tests.utils.keys import make_key
from tests.utils.problems import BOGUS_ID, assert_problem
from tests.utils.refused_requests import dead_job, job_state

# ---- scopes ---------------------------------------------------------------------------------------


async def test_read_only_key_cannot_replay_or_cancel_and_the_jobs_are_unchanged(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    dead = await dead_job(client, auth)
    pending = await submit_id(client, auth, "demo.csv", rows=3)
    reader = await make_key("acme", "jobs:read")
    before = {j: await job_state(j) for j in (dead, pending)}
    for job_id in (dead, pending):
        assert_problem(await client.post(f"/v1/jobs/{job_id}/replay", headers=reader), 403)
        assert_problem(await client.post(f"/v1/jobs/{job_id}/cancel", headers=reader), 403)
    assert {j: await job_state(j) for j in (dead, pending)} == before


async def test_missing_scope_is_403_before_any_lookup_on_replay_cancel_and_bulk_replay(
    client: httpx.AsyncClient, env: Any
) -> None:
    reader = await make_key("acme", "jobs:read")
    writer = await make_key("acme", "jobs:read,jobs:write")
    # An id that exists nowhere: 403, not 404, so a key without the scope learns nothing.
    assert_problem(await client.post(f"/v1/jobs/{BOGUS_ID}/replay", headers=reader), 403)
    assert_problem(await client.post(f"/v1/jobs/{BOGUS_ID}/cancel", headers=reader), 403)
    for body in ({"job_ids": [BOGUS_ID]}, {"report_type": "demo.flaky"}, {}, {"job_ids": "nope"}):
        assert_problem(await client.post("/v1/dead-letters/replay", json=body, headers=writer), 403)
    resp = await client.post(
        "/v1/dead-letters/replay", content=b"{oops", headers={**writer, "Content-Type": "application/json"}
    )
    assert_problem(resp, 403)


async def test_write_key_cannot_bulk_replay_and_the_dead_letters_stay_unreplayed(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    dead = await dead_job(client, auth)
    before = await job_state(dead)
    writer_only = await make_key("acme", "jobs:write")
    for headers in (auth, writer_only):
        for body in ({"job_ids": [dead]}, {"report_type": "demo.flaky"}):
            assert_problem(await client.post("/v1/dead-letters/replay", json=body, headers=headers), 403)
    assert await job_state(dead) == before
    assert before["status"] == "dead" and before["letters"][0][1] is None


# ---- cross-tenant writes --------------------------------------------------------------------------


async def test_replay_and_cancel_of_another_tenants_job_are_404_and_change_nothing(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    dead = await dead_job(client, auth)
    pending = await submit_id(client, auth, "demo.csv", rows=3)
    other = await make_key("globex", "jobs:read,jobs:write")
    before = {j: await job_state(j) for j in (dead, pending)}
    for job_id in (dead, pending):
        # 404 whatever the state (the owner would get 409 for one of each): existence is not revealed.
        assert_problem(await client.post(f"/v1/jobs/{job_id}/replay", headers=other), 404)
        assert_problem(await client.post(f"/v1/jobs/{job_id}/cancel", headers=other), 404)
    assert {j: await job_state(j) for j in (dead, pending)} == before
    assert before[dead]["status"] == "dead" and before[pending]["status"] == "pending"
    # And the owner still can: the 404 was about the tenant, not the job.
    assert (await client.post(f"/v1/jobs/{dead}/replay", headers=auth)).status_code == 202
    assert (await client.post(f"/v1/jobs/{pending}/cancel", headers=auth)).status_code == 202


async def test_dead_letters_are_invisible_across_tenants_even_archived_and_admin_sees_all(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    other = await make_key("globex", "jobs:read,jobs:write")
    acme_job = await dead_job(client, auth)
    globex_job = await dead_job(client, other)
    admin = await make_key("ops", "admin")

    async def seen(headers: dict[str, str]) -> set[str]:
        resp = await client.get(
            "/v1/dead-letters", params={"include_archived": "true", "limit": 200}, headers=headers
        )
        assert resp.status_code == 200, resp.text
        return {item["job_id"] for item in resp.json()["items"]}

    assert await seen(auth) == {acme_job}
    assert await seen(other) == {globex_job}
    assert await seen(admin) == {acme_job, globex_job}


async def test_admin_may_replay_and_cancel_a_job_of_any_tenant(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    dead = await dead_job(client, auth)
    pending = await submit_id(client, auth, "demo.csv", rows=3)
    admin = await make_key("ops", "admin")
    replayed = await client.post(f"/v1/jobs/{dead}/replay", headers=admin)
    assert replayed.status_code == 202 and replayed.json()["replay_count"] == 1
    cancelled = await client.post(f"/v1/jobs/{pending}/cancel", headers=admin)
    assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"


async def test_tenant_names_that_mysql_would_confuse_cannot_be_created(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    """MySQL's default collation folds case, accents and trailing spaces: tenants are lowercase slugs."""
    job_id = await submit_id(client, auth, "demo.csv", rows=3)
    before = await job_state(job_id)
    for tenant in ("ACME", "acme ", "ácme", " acme", "acme\n", ""):
        with pytest.raises(ValidationFailed):
            await make_key(tenant, "jobs:read,jobs:write")
    assert await job_state(job_id) == before
