"""Schedules in the console: the filtered list, one schedule's page (fields, next fires, runs) and its pause,
resume, trigger and delete actions, with the API's own service calls, tenants, scopes and refusals."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, ConfigDict, Field

from app.core.db import session_scope
from app.models import Schedule
from app.reports.base import ReportContext
from app.reports.registry import registry
from tests.utils.console import raw_key, sign_in
from tests.utils.console_pages import element, flash_after, href_of, post_actions, text_of, texts_of
from tests.utils.jobs import get_job
from tests.utils.keys import bearer, make_key
from tests.utils.problems import BOGUS_ID
from tests.utils.schedules import create_schedule, schedule_jobs

SCRIPT = "<script>alert(1)</script>"
ACTIONS = ("pause", "resume", "trigger", "delete")


def schedule_ids(page: str) -> list[str]:
    return re.findall(r'<tr data-testid="schedule-row" data-schedule-id="([^"]+)"', page)


async def page_of(client: httpx.AsyncClient, path: str) -> str:
    resp = await client.get(path)
    assert resp.status_code == 200, resp.text
    return resp.text


class NoteParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    note: str = Field(min_length=1, max_length=500)


async def note(ctx: ReportContext, params: NoteParams) -> None:
    return None


@pytest.fixture
def note_report() -> Iterator[str]:
    """`test.note`: a report type with a free-text param (the way a tenant's text reaches a schedule)."""
    registry.report_type("test.note", params=NoteParams)(note)
    yield "test.note"
    registry._types.pop("test.note", None)


async def test_the_list_shows_each_schedule_and_filters_by_type_and_paused(
    client: httpx.AsyncClient, env: Any
) -> None:
    key = await raw_key("acme")
    auth = bearer(key)
    daily = await create_schedule(client, auth, timezone="Europe/Berlin")
    hourly = await create_schedule(
        client, auth, name="hourly", cron=None, interval_s=3600, paused=True, overlap="queue"
    )
    other = await create_schedule(client, await make_key("globex"), name="theirs")
    await sign_in(client, key)

    page = await page_of(client, "/ui/schedules")
    assert 'id="schedules" data-refresh' in page
    assert schedule_ids(page) == [hourly["id"], daily["id"]]  # newest first; never another tenant's
    assert other["id"] not in page and "<th>tenant</th>" not in page
    assert 'href="/ui/schedules" aria-current="page"' in page
    rows = texts_of(page, "schedule-row")
    assert rows[0].startswith("hourly demo.csv every 3600 s UTC paused — — never queue run_once")
    nxt = daily["next_fire_times"][0]
    local_text = nxt["local"].replace("T", " ")
    assert rows[1].startswith(f"daily-sales demo.csv 0 8 * * * Europe/Berlin no {local_text} (CE")
    assert nxt["utc"][:19].replace("T", " ") in rows[1]

    assert schedule_ids(await page_of(client, "/ui/schedules?paused=true")) == [hourly["id"]]
    assert schedule_ids(await page_of(client, "/ui/schedules?paused=false")) == [daily["id"]]
    assert schedule_ids(await page_of(client, "/ui/schedules?report_type=demo.json")) == []
    assert schedule_ids(await page_of(client, "/ui/schedules?report_type=demo.csv&limit=1")) == [hourly["id"]]
    bad = await page_of(client, "/ui/schedules?paused=maybe")
    assert text_of(bad, "filter-error") == "paused: true or false" and schedule_ids(bad) == []


async def test_an_admin_sees_every_tenants_schedules_with_their_tenant(
    client: httpx.AsyncClient, env: Any
) -> None:
    mine = await create_schedule(client, await make_key("acme"))
    theirs = await create_schedule(client, await make_key("globex"), name="theirs")
    await sign_in(client, await raw_key("ops", "jobs:read,admin"))
    page = await page_of(client, "/ui/schedules")
    assert schedule_ids(page) == [theirs["id"], mine["id"]]
    assert "<th>tenant</th>" in page
    assert texts_of(page, "schedule-tenant") == ["globex", "acme"]


async def test_the_page_shows_every_field_and_the_next_five_fires_in_the_zone(
    client: httpx.AsyncClient, env: Any
) -> None:
    key = await raw_key("acme")
    schedule = await create_schedule(
        client,
        bearer(key),
        timezone="America/New_York",
        exclude_dates=["2099-12-25", "2099-01-01"],
        ordering_key="acct-1",
        missed_runs="run_all",
        max_catch_up=3,
    )
    await sign_in(client, key)
    page = await page_of(client, f"/ui/schedules/{schedule['id']}")
    assert text_of(page, "schedule-id") == schedule["id"]
    assert text_of(page, "schedule-name") == "daily-sales"
    assert text_of(page, "fires") == "cron 0 8 * * * in America/New_York"
    assert text_of(page, "exclude-dates") == "2099-01-01, 2099-12-25"
    assert text_of(page, "ordering-key") == "acct-1"
    assert text_of(page, "paused") == "no"
    assert '<pre data-testid="params">{\n  &#34;rows&#34;: 10\n}</pre>' in page
    fires = texts_of(page, "next-fire")
    assert len(fires) == 5
    for shown, api in zip(fires, schedule["next_fire_times"], strict=True):
        assert shown.startswith(api["local"].replace("T", " ") + " (E")  # EST or EDT
        assert api["local"][-6:] in ("-05:00", "-04:00")
    for field in ("missed runs", "overlap", "max attempts", "callback", "start at", "end at", "created"):
        assert f"<dt>{field}</dt>" in page
    assert text_of(page, "no-runs") == "No fire yet."
    assert {"pause", "trigger", "delete"} <= set(re.findall(r'data-testid="(\w+)"', page))
    assert 'data-testid="resume"' not in page


async def test_pause_resume_and_trigger_from_the_page(client: httpx.AsyncClient, env: Any) -> None:
    key = await raw_key("acme")
    auth = bearer(key)
    schedule = await create_schedule(client, auth)
    sid = schedule["id"]
    csrf = await sign_in(client, key)
    assert f"/ui/schedules/{sid}/pause" in post_actions(await page_of(client, f"/ui/schedules/{sid}"))

    resp = await client.post(f"/ui/schedules/{sid}/pause", data={"csrf": csrf})
    assert resp.headers["location"] == f"/ui/schedules/{sid}"
    page, flash = await flash_after(client, resp)
    assert flash == "Schedule daily-sales paused: nothing fires or is recorded until it is resumed."
    assert text_of(page, "paused") == "yes" and text_of(page, "no-next-fires") == "None while paused."
    assert 'data-testid="resume"' in page and 'data-testid="pause"' not in page
    assert (await client.get(f"/v1/schedules/{sid}", headers=auth)).json()["paused"] is True

    page, flash = await flash_after(
        client, await client.post(f"/ui/schedules/{sid}/resume", data={"csrf": csrf})
    )
    assert flash.startswith("Schedule daily-sales resumed (the paused period is not caught up); next fire ")
    assert text_of(page, "paused") == "no" and len(texts_of(page, "next-fire")) == 5
    assert (await client.get(f"/v1/schedules/{sid}", headers=auth)).json()["paused"] is False

    resp = await client.post(f"/ui/schedules/{sid}/trigger", data={"csrf": csrf})
    page, flash = await flash_after(client, resp)
    [job] = await schedule_jobs(sid)
    assert flash == f"Schedule daily-sales triggered: job {job.id} submitted (a manual run)."
    [run] = texts_of(page, "run")
    assert "submitted" in run and "manual" in run
    assert 'data-testid="run" data-manual="true" data-result="submitted"' in page
    assert href_of(page, "run-job") == f"/ui/jobs/{job.id}"
    assert href_of(page, "last-job") == f"/ui/jobs/{job.id}"
    assert (await get_job(client, auth, job.id))["status"] in ("pending", "running", "done")
    assert (await client.get(f"/ui/jobs/{job.id}")).status_code == 200
    runs = (await client.get(f"/v1/schedules/{sid}/runs", headers=auth)).json()["items"]
    assert [(r["manual"], r["job_id"]) for r in runs] == [(True, job.id)]


async def test_delete_from_the_page_removes_the_schedule_but_not_its_jobs(
    client: httpx.AsyncClient, env: Any
) -> None:
    key = await raw_key("acme")
    auth = bearer(key)
    schedule = await create_schedule(client, auth)
    sid = schedule["id"]
    csrf = await sign_in(client, key)
    await client.post(f"/ui/schedules/{sid}/trigger", data={"csrf": csrf})
    [job] = await schedule_jobs(sid)
    page = await page_of(client, f"/ui/schedules/{sid}")
    assert re.search(r'action="/ui/schedules/\w+/delete" class="inline" data-confirm="Delete schedule', page)

    resp = await client.post(f"/ui/schedules/{sid}/delete", data={"csrf": csrf})
    assert resp.headers["location"] == "/ui/schedules"
    page, flash = await flash_after(client, resp)
    assert flash == "Schedule daily-sales deleted with its run records; the jobs it made stay."
    assert schedule_ids(page) == []
    assert (await client.get(f"/v1/schedules/{sid}", headers=auth)).status_code == 404
    assert (await client.get(f"/ui/schedules/{sid}")).status_code == 404
    assert (await get_job(client, auth, job.id))["id"] == job.id
    again = await client.post(f"/ui/schedules/{sid}/delete", data={"csrf": csrf})
    assert again.status_code == 404 and text_of(again.text, "problem").startswith("Not found No schedule")


async def test_a_read_only_key_sees_no_action_and_its_posts_are_403(
    client: httpx.AsyncClient, env: Any
) -> None:
    writer = await make_key("acme")
    schedule = await create_schedule(client, writer)
    sid = schedule["id"]
    csrf = await sign_in(client, await raw_key("acme", "jobs:read"))
    for path in ("/ui/schedules", f"/ui/schedules/{sid}"):
        page = await page_of(client, path)
        assert post_actions(page) == ["/ui/logout"], path
    page = await page_of(client, f"/ui/schedules/{sid}")
    for action in ACTIONS:
        assert f'data-testid="{action}"' not in page
        refused = await client.post(f"/ui/schedules/{sid}/{action}", data={"csrf": csrf})
        assert refused.status_code == 403, action
        assert "This key lacks the `jobs:write` scope." in text_of(refused.text, "problem")
    after = (await client.get(f"/v1/schedules/{sid}", headers=writer)).json()
    assert after["paused"] is False and after["last_fire_at"] is None
    assert await schedule_jobs(sid) == []


async def test_a_post_without_the_csrf_token_is_403_and_changes_nothing(
    client: httpx.AsyncClient, env: Any
) -> None:
    key = await raw_key("acme")
    schedule = await create_schedule(client, bearer(key))
    sid = schedule["id"]
    await sign_in(client, key)
    for action in ACTIONS:
        for data in ({}, {"csrf": "forged"}):
            refused = await client.post(f"/ui/schedules/{sid}/{action}", data=data)
            assert refused.status_code == 403, action
            assert "security token is missing or stale" in text_of(refused.text, "problem")
    assert (await client.get(f"/v1/schedules/{sid}", headers=bearer(key))).json()["paused"] is False
    assert await schedule_jobs(sid) == []


async def test_another_tenants_schedule_is_not_found(client: httpx.AsyncClient, env: Any) -> None:
    theirs = await create_schedule(client, await make_key("globex"))
    sid = theirs["id"]
    csrf = await sign_in(client, await raw_key("acme"))
    for path in (f"/ui/schedules/{sid}", f"/ui/schedules/{BOGUS_ID}", "/ui/schedules/not-an-id"):
        page = await client.get(path)
        assert page.status_code == 404, path
        assert text_of(page.text, "problem").startswith("Not found No schedule")
    for action in ACTIONS:
        refused = await client.post(f"/ui/schedules/{sid}/{action}", data={"csrf": csrf})
        assert refused.status_code == 404, action
    assert schedule_ids(await page_of(client, "/ui/schedules")) == []
    assert await schedule_jobs(sid) == []
    assert (await client.get(f"/v1/schedules/{sid}", headers=await make_key("globex"))).status_code == 200


async def test_a_tenants_text_is_shown_as_text(client: httpx.AsyncClient, env: Any, note_report: str) -> None:
    key = await raw_key("acme")
    schedule = await create_schedule(
        client,
        bearer(key),
        report_type=note_report,
        params={"note": SCRIPT},
        ordering_key=SCRIPT,
    )
    sid = schedule["id"]
    async with session_scope() as session:  # a name the API would refuse, as if stored by an older version
        row = await session.get(Schedule, sid)
        assert row is not None
        row.name = SCRIPT
    await sign_in(client, key)
    for path in ("/ui/schedules", f"/ui/schedules/{sid}"):
        page = await page_of(client, path)
        assert "<script>" not in page.lower().replace('<script src="/ui/static/console.js" defer>', ""), path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page, path
    page = await page_of(client, f"/ui/schedules/{sid}")
    assert text_of(page, "schedule-name") == SCRIPT
    assert text_of(page, "ordering-key") == SCRIPT
    params = element(page, "params")
    assert params is not None and "&lt;script&gt;" in params
    assert 'data-confirm="Delete schedule &lt;script&gt;alert(1)&lt;/script&gt; and its run' in page


async def test_pages_answer_with_the_strict_csp(client: httpx.AsyncClient, env: Any) -> None:
    key = await raw_key("acme")
    schedule = await create_schedule(client, bearer(key))
    await sign_in(client, key)
    for path in ("/ui/schedules", f"/ui/schedules/{schedule['id']}"):
        resp = await client.get(path)
        csp = resp.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert (
            " style=" not in resp.text and "<script>" not in resp.text and " on" + "click=" not in resp.text
        )
