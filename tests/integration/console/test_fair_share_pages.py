"""Fair share in the console: a job's priority (page and list) and why it waits in words; the admin's Fair
share page listing report types and tenants with Pause / Resume (CSRF, admin only), through app.fairshare.
"""

from __future__ import annotations

from typing import Any

import httpx

from app.fairshare import service as fairshare
from tests.utils.console import raw_key, sign_in
from tests.utils.console_pages import flash_after, post_actions, text_of, texts_of
from tests.utils.jobs import submit
from tests.utils.keys import bearer


async def page_of(client: httpx.AsyncClient, path: str) -> str:
    resp = await client.get(path)
    assert resp.status_code == 200, resp.text
    return resp.text


async def test_the_job_page_shows_the_priority_and_why_a_paused_type_s_job_waits(
    client: httpx.AsyncClient, env: Any
) -> None:
    key = await raw_key("acme")
    job = await submit(client, bearer(key), "demo.csv", job={"priority": 7}, rows=1)
    await fairshare.set_type("demo.csv", {"paused": True})
    await sign_in(client, key)
    page = await page_of(client, f"/ui/jobs/{job['id']}")
    assert text_of(page, "priority").startswith("7")
    assert (
        text_of(page, "waiting-for")
        == "Waiting: report type demo.csv is paused; it starts once that is resumed."
    )
    assert "waiting for a free worker" not in text_of(page, "waits-for")
    assert texts_of(await page_of(client, "/ui/jobs"), "job-priority") == ["7"]

    await fairshare.set_type("demo.csv", {"paused": False})
    page = await page_of(client, f"/ui/jobs/{job['id']}")
    assert "waiting-for" not in page and "waiting for a free worker" in text_of(page, "waits-for")


async def test_an_admin_pauses_and_resumes_a_report_type_and_a_tenant_from_the_fair_share_page(
    client: httpx.AsyncClient, env: Any
) -> None:
    await fairshare.set_tenant("acme", {"weight": 3})
    csrf = await sign_in(client, await raw_key("ops", "admin"))
    page = await page_of(client, "/ui/fair-share")
    assert 'href="/ui/fair-share"' in page
    assert "/ui/fair-share/types/demo.csv/pause" in post_actions(page)
    assert "/ui/fair-share/tenants/acme/pause" in post_actions(page)

    resp = await client.post("/ui/fair-share/types/demo.csv/pause", data={"csrf": csrf})
    page, flash = await flash_after(client, resp)
    assert flash == "Report type demo.csv paused: none of its jobs starts."
    assert (await fairshare.get_type("demo.csv")).paused
    assert "/ui/fair-share/types/demo.csv/resume" in post_actions(page)
    resp = await client.post("/ui/fair-share/types/demo.csv/resume", data={"csrf": csrf})
    assert (await flash_after(client, resp))[1] == "Report type demo.csv resumed."
    assert not (await fairshare.get_type("demo.csv")).paused

    resp = await client.post("/ui/fair-share/tenants/acme/pause", data={"csrf": csrf})
    page, flash = await flash_after(client, resp)
    assert flash == "Tenant acme paused: none of its jobs starts."
    tenant = await fairshare.get_tenant("acme")
    assert tenant.paused and tenant.weight == 3
    assert "/ui/fair-share/tenants/acme/resume" in post_actions(page)


async def test_the_fair_share_page_and_its_actions_are_for_admins_with_the_form_s_token(
    client: httpx.AsyncClient, env: Any
) -> None:
    csrf = await sign_in(client, await raw_key("acme", "jobs:read,jobs:write"))
    assert 'href="/ui/fair-share"' not in await page_of(client, "/ui")
    assert (await client.get("/ui/fair-share")).status_code == 403
    resp = await client.post("/ui/fair-share/types/demo.csv/pause", data={"csrf": csrf})
    assert resp.status_code == 403
    assert not (await fairshare.get_type("demo.csv")).paused

    await sign_in(client, await raw_key("ops", "admin"))
    resp = await client.post("/ui/fair-share/types/demo.csv/pause", data={"csrf": "stale"})
    assert resp.status_code == 403 and not (await fairshare.get_type("demo.csv")).paused
    csrf = await sign_in(client, await raw_key("ops", "admin"))
    missing = await client.post("/ui/fair-share/types/no.such.type/pause", data={"csrf": csrf})
    assert missing.status_code == 404
    bad_tenant = await client.post("/ui/fair-share/tenants/Not%20A%20Tenant/pause", data={"csrf": csrf})
    assert bad_tenant.status_code == 422
