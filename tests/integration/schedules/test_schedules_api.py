"""The /v1/schedules API on real MariaDB: create (next fires in the zone), every invalid input → 422 with
nothing created, duplicates, listing and paging, patch, delete, pause/resume, tenants, scopes, job filter.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from app.core.db import session_scope
from app.core.tenancy import EVERY_TENANT
from app.schedules.repository import ScheduleFilter, ScheduleRepository
from tests.utils.jobs import parse_ts
from tests.utils.keys import make_key
from tests.utils.problems import BOGUS_ID, assert_problem
from tests.utils.schedules import DAILY, create_schedule, insert_fired_job, make_due


async def _count_schedules() -> int:
    async with session_scope() as session:
        return len(await ScheduleRepository(session).list(ScheduleFilter(EVERY_TENANT), None, 1000))


def _locs(problem: dict[str, Any]) -> list[list[Any]]:
    return [e["loc"] for e in problem["errors"]]


async def test_create_answers_201_with_the_next_five_fires_in_utc_and_local_time(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    body = await create_schedule(client, auth, timezone="Europe/Berlin", exclude_dates=["2030-01-01"])
    assert body["name"] == "daily-sales" and body["cron"] == "0 8 * * *" and body["interval_s"] is None
    assert (body["missed_runs"], body["max_catch_up"], body["overlap"]) == ("run_once", 10, "skip")
    assert body["paused"] is False and body["last_fire_at"] is None
    fires = body["next_fire_times"]
    assert len(fires) == 5
    now = datetime.now(UTC)
    utcs = [parse_ts(f["utc"]) for f in fires]
    assert utcs == sorted(utcs) and now < utcs[0] <= now + timedelta(days=1)
    for fire, utc in zip(fires, utcs, strict=True):
        assert fire["utc"].endswith("Z")
        local = datetime.fromisoformat(fire["local"])
        assert (local.hour, local.minute) == (8, 0)
        assert local == utc
        # Berlin is UTC+1 in winter and UTC+2 in summer.
        assert fire["local"][-6:] == ("+02:00" if utc.hour == 6 else "+01:00")
    fetched = await client.get(f"/v1/schedules/{body['id']}", headers=auth)
    assert fetched.status_code == 200 and fetched.json()["id"] == body["id"]


async def test_a_six_field_cron_and_an_interval_are_accepted(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    seconds = await create_schedule(client, auth, name="every-2s", cron="*/2 * * * * *")
    gaps = {
        (parse_ts(b["utc"]) - parse_ts(a["utc"])).total_seconds()
        for a, b in zip(seconds["next_fire_times"], seconds["next_fire_times"][1:], strict=False)
    }
    assert gaps == {2.0}
    start = datetime(2031, 1, 1, tzinfo=UTC)
    interval = await create_schedule(
        client, auth, name="hourly", cron=None, interval_s=3600, start_at=start.isoformat()
    )
    assert [parse_ts(f["utc"]) for f in interval["next_fire_times"]] == [
        start + timedelta(hours=h) for h in range(5)
    ]
    end = (start + timedelta(hours=5)).isoformat()
    resp = await client.patch(
        f"/v1/schedules/{interval['id']}", json={"interval_s": 7200, "end_at": end}, headers=auth
    )
    assert resp.status_code == 200, resp.text
    assert [parse_ts(f["utc"]) for f in resp.json()["next_fire_times"]] == [
        start + timedelta(hours=h) for h in (0, 2, 4)
    ]


async def test_a_duplicate_name_is_409_and_other_tenants_may_use_it(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    await create_schedule(client, auth)
    assert_problem(await client.post("/v1/schedules", json=DAILY, headers=auth), 409)
    await create_schedule(client, await make_key("globex"))
    assert await _count_schedules() == 2


@pytest.mark.parametrize(
    ("fields", "loc"),
    [
        ({"cron": "61 * * * *"}, ["cron"]),
        ({"cron": "0 0 30 2 *"}, ["cron"]),
        ({"cron": "0 8 * *"}, ["cron"]),
        ({"timezone": "Mars/Olympus_Mons"}, ["timezone"]),
        ({"interval_s": 60}, ["cron"]),
        ({"cron": None}, ["cron"]),
        ({"exclude_dates": ["2026-02-30"]}, ["exclude_dates", 0]),
        ({"exclude_dates": ["2026-12-24", "24.12.2026"]}, ["exclude_dates", 1]),
        ({"report_type": "no.such"}, ["report_type"]),
        ({"params": {"rows": 0}}, ["params", "rows"]),
        ({"params": {"rows": 1, "colour": "red"}}, ["params", "colour"]),
        ({"start_at": "2031-01-02T00:00:00Z", "end_at": "2031-01-01T00:00:00Z"}, ["end_at"]),
    ],
)
async def test_invalid_input_is_422_naming_the_field_and_creates_nothing(
    client: httpx.AsyncClient, auth: dict[str, str], fields: dict[str, Any], loc: list[Any]
) -> None:
    resp = await client.post("/v1/schedules", json={**DAILY, **fields}, headers=auth)
    problem = assert_problem(resp, 422)
    assert ["body", *loc] in _locs(problem), problem
    assert await _count_schedules() == 0


async def test_request_shape_errors_are_422(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    for fields in (
        {"name": "Daily Sales"},
        {"interval_s": 0, "cron": None},
        {"missed_runs": "sometimes"},
        {"overlap": "never"},
        {"max_catch_up": 1001},
        {"colour": "red"},
        {"start_at": "tomorrow"},
    ):
        assert_problem(await client.post("/v1/schedules", json={**DAILY, **fields}, headers=auth), 422)
    assert await _count_schedules() == 0


async def test_list_filters_by_report_type_and_paused_and_pages_newest_first(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    ids = [(await create_schedule(client, auth, name=f"s{i}", paused=i % 2 == 1))["id"] for i in range(5)]
    await create_schedule(client, auth, name="sleeper", report_type="demo.sleep", params={"seconds": 1})
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, "report_type": "demo.csv"}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get("/v1/schedules", params=params, headers=auth)).json()
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids[::-1]
    paused = (await client.get("/v1/schedules", params={"paused": "true"}, headers=auth)).json()
    assert [s["id"] for s in paused["items"]] == [ids[3], ids[1]]
    assert all(s["next_fire_times"] == [] for s in paused["items"])
    bad = await client.get("/v1/schedules", params={"cursor": "nope"}, headers=auth)
    assert_problem(bad, 422)


async def test_patch_changes_the_named_fields_and_recomputes_the_next_fires(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    created = await create_schedule(client, auth, callback_url=None, ordering_key="sales")
    url = f"/v1/schedules/{created['id']}"
    resp = await client.patch(url, json={"cron": "30 17 * * *", "timezone": "America/New_York"}, headers=auth)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (
        body["cron"] == "30 17 * * *" and body["ordering_key"] == "sales" and body["params"] == {"rows": 10}
    )
    assert body["updated_at"] >= created["updated_at"]
    for fire in body["next_fire_times"]:
        local = datetime.fromisoformat(fire["local"])
        assert (local.hour, local.minute) == (17, 30) and fire["local"][-6:] in ("-05:00", "-04:00")
    switched = (await client.patch(url, json={"interval_s": 60}, headers=auth)).json()
    assert switched["cron"] is None and switched["interval_s"] == 60
    cleared = (await client.patch(url, json={"ordering_key": None}, headers=auth)).json()
    assert cleared["ordering_key"] is None
    for bad in ({"cron": "61 * * * *"}, {"name": None}, {"params": {"rows": -1}}, {"colour": 1}):
        assert_problem(await client.patch(url, json=bad, headers=auth), 422)
    unchanged = (await client.get(url, headers=auth)).json()
    assert {k: v for k, v in unchanged.items() if k != "next_fire_times"} == {
        k: v for k, v in cleared.items() if k != "next_fire_times"
    }


async def test_renaming_onto_another_schedules_name_is_409(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    await create_schedule(client, auth, name="first")
    second = await create_schedule(client, auth, name="second")
    resp = await client.patch(f"/v1/schedules/{second['id']}", json={"name": "first"}, headers=auth)
    assert_problem(resp, 409)
    renamed = await client.patch(f"/v1/schedules/{second['id']}", json={"name": "third"}, headers=auth)
    assert renamed.status_code == 200 and renamed.json()["name"] == "third"


async def test_delete_answers_204_and_leaves_the_schedules_jobs(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    created = await create_schedule(client, auth)
    job_id = await insert_fired_job("acme", created["id"], datetime(2031, 1, 1, 7, tzinfo=UTC))
    url = f"/v1/schedules/{created['id']}"
    resp = await client.delete(url, headers=auth)
    assert resp.status_code == 204 and resp.content == b""
    assert_problem(await client.get(url, headers=auth), 404)
    assert_problem(await client.delete(url, headers=auth), 404)
    assert (await client.get(f"/v1/jobs/{job_id}", headers=auth)).status_code == 200
    assert await _count_schedules() == 0


async def test_pause_empties_the_next_fires_and_resume_restarts_from_the_next_future_fire(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    created = await create_schedule(client, auth, cron="*/5 * * * * *")
    url = f"/v1/schedules/{created['id']}"
    paused = await client.post(f"{url}/pause", headers=auth)
    assert paused.status_code == 200 and paused.json()["paused"] is True
    assert paused.json()["next_fire_times"] == []
    assert (await client.post(f"{url}/pause", headers=auth)).json()["paused"] is True
    await make_due(created["id"], datetime(2020, 1, 1, tzinfo=UTC))
    before = datetime.now(UTC)
    resumed = await client.post(f"{url}/resume", headers=auth)
    assert resumed.status_code == 200 and resumed.json()["paused"] is False
    assert len(resumed.json()["next_fire_times"]) == 5
    async with session_scope() as session:
        row = await ScheduleRepository(session).get(created["id"], EVERY_TENANT)
    assert row is not None and row.next_fire_at is not None
    assert before < row.next_fire_at <= before + timedelta(seconds=6)  # no catch-up of the paused period
    runs = await client.get(f"{url}/runs", headers=auth)
    assert runs.status_code == 200 and runs.json() == {"items": [], "next_cursor": None}


async def test_another_tenants_schedule_is_404_everywhere(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    created = await create_schedule(client, auth)
    other = await make_key("globex")
    url = f"/v1/schedules/{created['id']}"
    for method, path in (
        ("GET", url),
        ("PATCH", url),
        ("DELETE", url),
        ("POST", f"{url}/pause"),
        ("POST", f"{url}/resume"),
        ("POST", f"{url}/trigger"),
        ("GET", f"{url}/runs"),
        ("GET", f"/v1/schedules/{BOGUS_ID}"),
        ("GET", "/v1/schedules/not-an-id"),
    ):
        resp = await client.request(method, path, headers=other, json={} if method == "PATCH" else None)
        assert_problem(resp, 404)
    listing = await client.get("/v1/schedules", headers=other)
    assert listing.json() == {"items": [], "next_cursor": None}
    assert (await client.get(url, headers=auth)).json()["paused"] is False


async def test_a_read_only_key_may_read_but_not_change_schedules(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    created = await create_schedule(client, auth)
    reader = await make_key(scopes="jobs:read")
    url = f"/v1/schedules/{created['id']}"
    assert (await client.get(url, headers=reader)).status_code == 200
    assert (await client.get("/v1/schedules", headers=reader)).status_code == 200
    for method, path in (
        ("POST", "/v1/schedules"),
        ("PATCH", url),
        ("DELETE", url),
        ("POST", f"{url}/pause"),
        ("POST", f"{url}/resume"),
        ("POST", f"{url}/trigger"),
    ):
        assert_problem(await client.request(method, path, headers=reader, json=DAILY), 403)
    assert await _count_schedules() == 1


async def test_jobs_carry_their_schedule_and_list_by_schedule_id(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    created = await create_schedule(client, auth)
    nominal = datetime(2031, 1, 1, 7, tzinfo=UTC)
    fired = await insert_fired_job("acme", created["id"], nominal)
    await insert_fired_job("acme", None, None)
    listing = await client.get("/v1/jobs", params={"schedule_id": created["id"]}, headers=auth)
    assert listing.status_code == 200
    items = listing.json()["items"]
    assert [j["id"] for j in items] == [fired]
    assert items[0]["schedule_id"] == created["id"]
    assert items[0]["scheduled_for"] == "2031-01-01T07:00:00.000000Z"
    everything = (await client.get("/v1/jobs", headers=auth)).json()["items"]
    assert {j["schedule_id"] for j in everything} == {created["id"], None}


async def test_trigger_answers_202_with_a_manual_run_and_its_job_listed_first_in_runs(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    created = await create_schedule(client, auth, timezone="Asia/Kolkata", paused=True)
    url = f"/v1/schedules/{created['id']}"
    resp = await client.post(f"{url}/trigger", headers=auth)
    assert resp.status_code == 202, resp.text
    run = resp.json()
    assert run["manual"] is True and run["result"] == "submitted" and run["reason"] is None
    assert run["scheduled_for"].endswith("+05:30")
    assert datetime.fromisoformat(run["scheduled_for"]) == parse_ts(run["fire_time"])
    job = (await client.get(f"/v1/jobs/{run['job_id']}", headers=auth)).json()
    assert job["schedule_id"] == created["id"] and job["scheduled_for"] == run["fire_time"]
    second = (await client.post(f"{url}/trigger", headers=auth)).json()
    first_page = (await client.get(f"{url}/runs", params={"limit": 1}, headers=auth)).json()
    assert [r["job_id"] for r in first_page["items"]] == [second["job_id"]]
    rest = await client.get(f"{url}/runs", params={"cursor": first_page["next_cursor"]}, headers=auth)
    assert [r["job_id"] for r in rest.json()["items"]] == [run["job_id"]]
    assert rest.json()["next_cursor"] is None
    assert_problem(await client.get(f"{url}/runs", params={"cursor": "x"}, headers=auth), 422)
