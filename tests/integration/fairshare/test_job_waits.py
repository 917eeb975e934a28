"""Priority and `waiting_for` in the job document: a submit names its priority (0–9, else the type's, else
5); a paused report type or tenant, or a full cap, shows in the 202 and in every read, beside `blocked_by`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.utils.batches import post_batch
from tests.utils.fairshare import admin_call, pause_tenant, pause_type, resume_type
from tests.utils.jobs import get_job, submit
from tests.utils.keys import make_key
from tests.utils.polling import eventually
from tests.utils.problems import assert_problem
from tests.utils.workers import drain

pytestmark = pytest.mark.timeout(120)

PAUSED_CSV = {"paused": "report_type:demo.csv"}


@pytest.fixture
async def admin(env: Any) -> dict[str, str]:
    return await make_key(tenant="ops", scopes="admin")


async def listed(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, dict[str, Any]]:
    resp = await client.get("/v1/jobs", headers=headers)
    assert resp.status_code == 200, resp.text
    return {job["id"]: job for job in resp.json()["items"]}


async def test_a_submit_names_its_priority_else_gets_five(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    urgent = await submit(client, auth, "demo.csv", job={"priority": 9}, rows=1)
    lowest = await submit(client, auth, "demo.csv", job={"priority": 0}, rows=1)
    plain = await submit(client, auth, "demo.csv", rows=1)
    assert (urgent["priority"], lowest["priority"], plain["priority"]) == (9, 0, 5)
    assert (await get_job(client, auth, urgent["id"]))["priority"] == 9
    assert plain["waiting_for"] is None and plain["blocked_by"] is None
    assert {job["id"]: job["priority"] for job in (await listed(client, auth)).values()} == {
        urgent["id"]: 9,
        lowest["id"]: 0,
        plain["id"]: 5,
    }


@pytest.mark.parametrize("priority", [-1, 10, "high", 1.5, True])
async def test_a_priority_outside_0_to_9_is_422_naming_it(
    client: httpx.AsyncClient, auth: dict[str, str], priority: Any
) -> None:
    body = {"report_type": "demo.csv", "params": {"rows": 1}, "priority": priority}
    problem = assert_problem(await client.post("/v1/jobs", headers=auth, json=body), 422)
    assert ["body", "priority"] in [error["loc"][:2] for error in problem["errors"]], problem


async def test_batch_items_carry_their_priority_and_a_bad_one_is_that_item_s_422(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    items = [
        {"report_type": "demo.csv", "params": {"rows": 1}, "priority": 8},
        {"report_type": "demo.csv", "params": {"rows": 1}, "priority": 12},
        {"report_type": "demo.csv", "params": {"rows": 1}},
    ]
    results = (await post_batch(client, auth, items))["results"]
    assert [r["status"] for r in results] == [202, 422, 202]
    assert results[0]["job"]["priority"] == 8 and results[2]["job"]["priority"] == 5
    assert any("priority" in error["loc"] for error in results[1]["problem"]["errors"]), results[1]


async def test_a_job_of_a_paused_type_shows_it_in_the_202_and_in_every_read_until_resumed(
    client: httpx.AsyncClient, auth: dict[str, str], admin: dict[str, str]
) -> None:
    before = await submit(client, auth, "demo.csv", rows=1)
    assert before["waiting_for"] is None
    await pause_type(client, admin, "demo.csv")
    after = await submit(client, auth, "demo.csv", rows=1)
    other = await submit(client, auth, "demo.sleep", seconds=0)
    assert after["status"] == "pending" and after["waiting_for"] == PAUSED_CSV
    assert other["waiting_for"] is None
    for job_id in (before["id"], after["id"]):
        assert (await get_job(client, auth, job_id))["waiting_for"] == PAUSED_CSV
    waits = {job_id: job["waiting_for"] for job_id, job in (await listed(client, auth)).items()}
    assert waits == {before["id"]: PAUSED_CSV, after["id"]: PAUSED_CSV, other["id"]: None}
    batch = await post_batch(client, auth, [{"report_type": "demo.csv", "params": {"rows": 1}}])
    assert batch["results"][0]["job"]["waiting_for"] == PAUSED_CSV

    await resume_type(client, admin, "demo.csv")
    assert (await get_job(client, auth, after["id"]))["waiting_for"] is None


async def test_a_paused_tenant_s_jobs_wait_and_a_cancelled_one_no_longer_does(
    client: httpx.AsyncClient, auth: dict[str, str], admin: dict[str, str]
) -> None:
    await pause_tenant(client, admin, "acme")
    job = await submit(client, auth, "demo.csv", rows=1)
    assert job["waiting_for"] == {"paused": "tenant:acme"}
    other_tenant = await make_key(tenant="beta")
    assert (await submit(client, other_tenant, "demo.csv", rows=1))["waiting_for"] is None
    resp = await client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth)
    assert resp.status_code == 202 and resp.json()["waiting_for"] is None


async def test_an_idempotent_repeat_shows_what_its_job_waits_for_now(
    client: httpx.AsyncClient, auth: dict[str, str], admin: dict[str, str]
) -> None:
    body = {"report_type": "demo.csv", "params": {"rows": 1}, "priority": 3}
    headers = {**auth, "Idempotency-Key": "k-1"}
    first = await client.post("/v1/jobs", headers=headers, json=body)
    assert first.status_code == 202 and first.json()["waiting_for"] is None
    await pause_type(client, admin, "demo.csv")
    again = await client.post("/v1/jobs", headers=headers, json=body)
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert again.json()["waiting_for"] == PAUSED_CSV and again.json()["priority"] == 3
    other = await client.post("/v1/jobs", headers=headers, json={**body, "priority": 4})
    assert_problem(other, 409)  # another priority is another request


async def test_the_202_names_the_predecessor_with_the_same_ordering_key(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    first = await submit(client, auth, "demo.csv", job={"ordering_key": "acct-1"}, rows=1)
    second = await submit(client, auth, "demo.csv", job={"ordering_key": "acct-1"}, rows=1)
    elsewhere = await submit(client, auth, "demo.csv", job={"ordering_key": "acct-2"}, rows=1)
    assert first["blocked_by"] is None and elsewhere["blocked_by"] is None
    assert second["blocked_by"] == first["id"]
    assert (await get_job(client, auth, second["id"]))["blocked_by"] == first["id"]


async def test_a_job_over_a_full_type_cap_shows_the_cap_while_the_slot_is_held(
    client: httpx.AsyncClient, auth: dict[str, str], admin: dict[str, str]
) -> None:
    await admin_call(client, admin, "PATCH", "/v1/report-types/demo.sleep", {"max_concurrency": 1})
    first = await submit(client, auth, "demo.sleep", seconds=1.5)
    second = await submit(client, auth, "demo.sleep", seconds=0)
    worker = asyncio.create_task(drain(burst=False))
    try:

        async def first_running() -> bool:
            return (await get_job(client, auth, first["id"]))["status"] == "running"

        await eventually(first_running, 10, "the first job running", 0.02)
        waiting = await get_job(client, auth, second["id"])
        assert waiting["status"] == "pending"
        assert waiting["waiting_for"] == {"cap": "report_type:demo.sleep", "limit": 1}
        policy = await admin_call(client, admin, "GET", "/v1/report-types/demo.sleep/policy")
        assert policy["running"] == 1
        done = await client.get(f"/v1/jobs/{second['id']}", params={"wait": 10}, headers=auth)
        assert done.json()["status"] == "done" and done.json()["waiting_for"] is None
    finally:
        worker.cancel()
