"""A schedule's `priority` (0–9, or null for the report type's): it round-trips through create, read, list
and patch, a bad one is 422 with nothing changed, and each job the schedule makes carries it.
"""

from __future__ import annotations

import httpx
import pytest

from tests.utils.jobs import get_job
from tests.utils.problems import assert_problem
from tests.utils.schedules import create_schedule


async def triggered_priority(client: httpx.AsyncClient, auth: dict[str, str], schedule_id: str) -> int:
    resp = await client.post(f"/v1/schedules/{schedule_id}/trigger", headers=auth)
    assert resp.status_code == 202, resp.text
    return int((await get_job(client, auth, resp.json()["job_id"]))["priority"])


async def test_priority_round_trips_and_the_schedule_s_jobs_carry_it(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    created = await create_schedule(client, auth, priority=8, paused=True)
    url = f"/v1/schedules/{created['id']}"
    assert created["priority"] == 8
    assert (await client.get(url, headers=auth)).json()["priority"] == 8
    assert [s["priority"] for s in (await client.get("/v1/schedules", headers=auth)).json()["items"]] == [8]
    assert await triggered_priority(client, auth, created["id"]) == 8

    lowered = await client.patch(url, headers=auth, json={"priority": 1})
    assert lowered.status_code == 200 and lowered.json()["priority"] == 1
    renamed = await client.patch(url, headers=auth, json={"name": "renamed"})
    assert renamed.json()["priority"] == 1  # left out: kept
    cleared = await client.patch(url, headers=auth, json={"priority": None})
    assert cleared.status_code == 200 and cleared.json()["priority"] is None
    assert await triggered_priority(client, auth, created["id"]) == 5  # the type's default


async def test_a_schedule_without_priority_has_null(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    assert (await create_schedule(client, auth))["priority"] is None


@pytest.mark.parametrize("priority", [-1, 10, "9", 2.5, False])
async def test_a_bad_priority_is_422_on_create_and_on_patch(
    client: httpx.AsyncClient, auth: dict[str, str], priority: object
) -> None:
    body = {"name": "p", "report_type": "demo.csv", "cron": "0 8 * * *", "priority": priority}
    problem = assert_problem(await client.post("/v1/schedules", headers=auth, json=body), 422)
    assert ["body", "priority"] in [e["loc"][:2] for e in problem["errors"]], problem
    created = await create_schedule(client, auth, priority=4)
    url = f"/v1/schedules/{created['id']}"
    assert_problem(await client.patch(url, headers=auth, json={"priority": priority}), 422)
    assert (await client.get(url, headers=auth)).json()["priority"] == 4
