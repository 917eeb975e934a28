"""The console in a real Chromium against real api, worker, dead-letter and scheduler processes.

Each test signs in with its own tenant's key (tests/browser/conftest.py), so they share one stack. Every page
a test visits is saved as var/screenshots/<page>.png (1280×800); the last test fills a tenant with realistic
jobs and shoots every page, and with UPDATE_README_SCREENSHOTS=1 copies them to docs/screenshots/.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from playwright.async_api import Browser, BrowserContext, Page, expect

from tests.utils.browser import (
    Console,
    Dialogs,
    copy_to_readme,
    new_context,
    refreshes,
    shoot,
    sign_in,
    update_readme_screenshots,
)
from tests.utils.jobs import get_attempts, get_job, submit_id, wait_job
from tests.utils.polling import eventually

pytestmark = pytest.mark.timeout(180)
expect.set_options(timeout=15_000)

XSS = '<script>alert(1)</script>"><img src=x onerror=alert(1)>'


# ---- helpers ---------------------------------------------------------------------------------------------


async def dead_job(client: httpx.AsyncClient, **job: Any) -> str:
    """A job that dies on its first attempt (demo.flaky, permanent) and whose dead letter exists."""
    job_id = await submit_id(client, None, "demo.flaky", fail_times=1, permanent=True, job=job or None)
    await wait_job(client, None, job_id, {"dead"})
    await letter_of(client, job_id)
    return job_id


async def letter_of(client: httpx.AsyncClient, job_id: str, **query: Any) -> dict[str, Any]:
    """The dead letter of `job_id`, once the dead-letter consumer has written it."""

    async def find() -> dict[str, Any] | None:
        resp = await client.get("/v1/dead-letters", params={"limit": 200, **query})
        assert resp.status_code == 200, resp.text
        return next((item for item in resp.json()["items"] if item["job_id"] == job_id), None)

    return dict(await eventually(find, 20, f"the dead letter of {job_id}", 0.1))


async def running(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    return await wait_job(client, None, job_id, {"running"})


async def alerted(console: Console, *job_ids: str) -> None:
    """Wait until the fake DingTalk has accepted an alert naming each job."""

    def sent() -> bool:
        texts = [r.text for r in console.dingtalk.received if r.accepted]
        return all(any(job_id in text for text in texts) for job_id in job_ids)

    await eventually(sent, 20, f"DingTalk alerts for {job_ids}", 0.1)


async def form_action(page: Page, button_testid: str, within: str = "main") -> str:
    """The action of the form holding a button (so forged POSTs go where the real ones go)."""
    form = page.locator(within).locator(f"form:has([data-testid={button_testid}])").first
    action = await form.get_attribute("action")
    assert action, f"the {button_testid} form has no action"
    return action


async def csrf_of(page: Page) -> str:
    """This session's CSRF token, as every form on the page carries it."""
    return await page.locator("input[name=csrf]").first.input_value()


async def no_script_injected(page: Page) -> None:
    """Nothing of XSS became markup: no dialog-prone element, no script with its code."""
    await expect(page.locator("img[src=x]")).to_have_count(0)
    assert await page.locator("[onerror]").count() == 0
    injected = await page.evaluate(
        "[...document.querySelectorAll('script')].filter(s => s.textContent.includes('alert(1)')).length"
    )
    assert injected == 0


# ---- sign-in ---------------------------------------------------------------------------------------------


async def test_sign_in_with_a_key(page: Page, context: BrowserContext, console: Console) -> None:
    await page.goto("/ui/workers")
    assert "/ui/login" in page.url  # not signed in: sent to the form, and back to the page afterwards
    await shoot(page, "login")
    key_field = page.locator("input[data-testid=api-key]")
    sign_in_button = page.locator("[data-testid=sign-in]")

    await key_field.fill("ro_not-a-key")
    async with page.expect_navigation():
        await sign_in_button.click()
    await expect(page.locator("[data-testid=login-error]")).to_contain_text("unknown or revoked")

    await key_field.fill(console.keys["acme"])
    async with page.expect_navigation():
        await sign_in_button.click()
    assert page.url.endswith("/ui/workers")
    await expect(page.locator("[data-testid=who]")).to_contain_text("acme")
    await page.goto("/ui")
    await expect(page.locator("[data-testid=by-status]")).to_be_visible()

    cookie = next(c for c in await context.cookies() if c["name"] == "ro_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
    assert cookie["expires"] > datetime.now(UTC).timestamp()


# ---- live updates ----------------------------------------------------------------------------------------


async def test_a_job_submitted_through_the_api_appears_on_overview_and_jobs_without_reloading(
    context: BrowserContext, console: Console
) -> None:
    overview, jobs = await context.new_page(), await context.new_page()
    await sign_in(overview, console.keys["live"], "/ui")
    await jobs.goto("/ui/jobs")
    await expect(jobs.locator("form.filters")).to_be_visible()
    for page in (overview, jobs):
        await refreshes(page)  # console.js is running
        await page.evaluate("window.__sameDocument = true")

    async with console.api("live") as client:
        job_id = await submit_id(client, None, "demo.sleep", seconds=30)
        await running(client, job_id)

        await expect(overview.locator(f"[data-testid=running] a[href='/ui/jobs/{job_id}']")).to_be_visible()
        await expect(jobs.locator(f"tr[data-testid=job-row][data-job-id='{job_id}']")).to_be_visible()
        for page in (overview, jobs):
            assert await page.evaluate("window.__sameDocument === true"), f"{page.url} was reloaded"
        await shoot(overview, "overview")
        await shoot(jobs, "jobs")
        assert (await client.post(f"/v1/jobs/{job_id}/cancel")).status_code == 202


async def test_select_several_jobs_and_cancel_them(page: Page, console: Console) -> None:
    async with console.api("live") as client:
        later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        ids = [await submit_id(client, None, "demo.csv", rows=10, job={"run_at": later}) for _ in range(3)]
        await sign_in(page, console.keys["live"], "/ui/jobs?status=scheduled")
        Dialogs(page)
        for job_id in ids[:2]:
            await page.locator(f"input[name=ids][value='{job_id}']").check()
        async with page.expect_navigation():
            await page.locator("[data-testid=bulk-cancel]").click()
        statuses = [(await get_job(client, None, i))["status"] for i in ids]
        assert statuses == ["cancelled", "cancelled", "scheduled"]


# ---- one job ---------------------------------------------------------------------------------------------


async def test_open_a_job_and_see_its_attempts(page: Page, console: Console) -> None:
    async with console.api("attempts") as client:
        job_id = await submit_id(client, None, "demo.flaky", fail_times=2)
        await wait_job(client, None, job_id, {"done"})

    await sign_in(page, console.keys["attempts"], "/ui/jobs")
    async with page.expect_navigation():
        await page.locator(f"tr[data-job-id='{job_id}'] a[href='/ui/jobs/{job_id}']").first.click()
    assert page.url.endswith(f"/ui/jobs/{job_id}")

    await expect(page.locator("[data-testid=job-status]")).to_contain_text("done")
    await expect(page.locator("pre[data-testid=params]")).to_contain_text('"fail_times": 2')
    attempts = page.locator("ol[data-testid=attempts] li[data-testid=attempt]")
    await expect(attempts).to_have_count(3)
    await expect(attempts.nth(0)).to_contain_text("demo.flaky failing attempt 1 of 2")
    await expect(attempts.nth(1)).to_contain_text("demo.flaky failing attempt 2 of 2")
    await expect(attempts.nth(2)).to_contain_text("succeeded")
    await shoot(page, "job")

    async with page.expect_download() as download:
        await page.locator("[data-testid=download]").click()
    assert (await download.value).suggested_filename == "flaky.txt"


async def test_cancel_a_running_job_from_its_page(page: Page, console: Console) -> None:
    async with console.api("cancel") as client:
        job_id = await submit_id(client, None, "demo.sleep", seconds=30)
        await running(client, job_id)
        await sign_in(page, console.keys["cancel"], f"/ui/jobs/{job_id}")
        dialogs = Dialogs(page)
        await expect(page.locator("[data-testid=job-status]")).to_contain_text("running")

        async with page.expect_navigation():
            await page.locator("[data-testid=cancel]").click()
        await expect(page.locator("[data-testid=job-status]")).to_contain_text("cancelled")
        job = await wait_job(client, None, job_id, {"cancelled"}, within_s=5)
        assert job["status"] == "cancelled"
        assert (await get_attempts(client, None, job_id))[-1]["outcome"] == "cancelled"
        assert dialogs.seen, "cancelling asks first"
        await expect(page.locator("[data-testid=cancel]")).to_have_count(0)  # nothing left to cancel


async def test_replay_a_dead_job_from_its_page(page: Page, console: Console) -> None:
    async with console.api("replay") as client:
        job_id = await dead_job(client)
        await sign_in(page, console.keys["replay"], f"/ui/jobs/{job_id}")
        Dialogs(page)
        await expect(page.locator("[data-testid=job-status]")).to_contain_text("dead")
        await expect(page.locator("[data-testid=last-error]")).to_contain_text("failing attempt 1 of 1")

        async with page.expect_navigation():
            await page.locator("[data-testid=replay]").click()
        job = await wait_job(client, None, job_id, {"done"})
        assert job["replay_count"] == 1
        await expect(page.locator("[data-testid=job-status]")).to_contain_text("done")
        await expect(page.locator("li[data-testid=attempt]")).to_have_count(2)


# ---- dead letters ----------------------------------------------------------------------------------------


async def test_bulk_replay_dead_letters_by_filter(page: Page, console: Console) -> None:
    async with console.api("acme") as client:
        before = await dead_job(client)  # dead before `since`: stays dead
        await asyncio.sleep(1.1)
        since = datetime.now(UTC).replace(microsecond=0)
        matching = [await dead_job(client) for _ in range(3)]
        other_type = await submit_id(
            client, None, "demo.steps", fail_step="generate", fail_times=100, job={"max_attempts": 1}
        )
        await wait_job(client, None, other_type, {"dead"})
        await letter_of(client, other_type)

        await sign_in(page, console.keys["admin"], "/ui/dead-letters")
        for job_id in [before, *matching, other_type]:
            await expect(page.locator(f"tr[data-testid=letter-row][data-job-id='{job_id}']")).to_be_visible()
        await shoot(page, "dead-letters")

        stamp = since.strftime("%Y-%m-%dT%H:%M:%SZ")
        await page.goto(f"/ui/dead-letters/replay-confirm?report_type=demo.flaky&since={stamp}")
        await expect(page.locator("[data-testid=replay-count]")).to_have_text("3")
        Dialogs(page)
        async with page.expect_navigation():
            await page.locator("[data-testid=confirm-replay]").click()

        for job_id in matching:
            job = await wait_job(client, None, job_id, {"done"})
            assert job["replay_count"] == 1
        for job_id in (before, other_type):
            job = await get_job(client, None, job_id)
            assert (job["status"], job["replay_count"]) == ("dead", 0)


async def test_resolving_a_dead_predecessor_lets_its_waiting_successors_run(
    page: Page, console: Console
) -> None:
    async with console.api("order") as client:
        key = {"ordering_key": "invoice-7"}
        predecessor = await dead_job(client, **key)
        successors = [await submit_id(client, None, "demo.csv", rows=5, job=key) for _ in range(2)]
        await asyncio.sleep(1)
        assert [(await get_job(client, None, s))["status"] for s in successors] == ["pending", "pending"]

        await sign_in(page, console.keys["order"], f"/ui/jobs/{successors[0]}")
        waits = page.locator("[data-testid=waits-for]")
        await expect(waits.locator(f"a[href='/ui/jobs/{predecessor}']")).to_be_visible()

        await page.goto("/ui/dead-letters")
        Dialogs(page)
        row = page.locator(f"tr[data-testid=letter-row][data-job-id='{predecessor}']")
        await row.locator("input[name=reason]").fill("Sent invoice 7 by hand")
        async with page.expect_navigation():
            await row.locator("[data-testid=resolve]").click()

        for job_id in successors:
            await wait_job(client, None, job_id, {"done"})
        assert (await get_job(client, None, predecessor))["status"] == "dead"
        letter = await letter_of(client, predecessor, include_archived="true")
        assert letter["resolution"] == "Sent invoice 7 by hand" and letter["resolved_at"]
        await expect(page.locator(f"tr[data-testid=letter-row][data-job-id='{predecessor}']")).to_have_count(
            0
        )


# ---- who may do what -------------------------------------------------------------------------------------


async def test_a_read_only_key_sees_no_buttons_and_its_forged_post_is_403(
    browser: Browser, page: Page, console: Console
) -> None:
    async with console.api("acme") as client:
        job_id = await dead_job(client)
        letter = await letter_of(client, job_id)

    # Where a writer's buttons post to.
    writer_ctx = await new_context(browser, console.url)
    try:
        writer = await writer_ctx.new_page()
        await sign_in(writer, console.keys["acme"], f"/ui/jobs/{job_id}")
        replay_action = await form_action(writer, "replay")
        await writer.goto("/ui/dead-letters")
        resolve_action = await form_action(
            writer, "resolve", f"tr[data-testid=letter-row][data-job-id='{job_id}']"
        )
    finally:
        await writer_ctx.close()

    await sign_in(page, console.keys["acme-ro"], f"/ui/jobs/{job_id}")
    await expect(page.locator("[data-testid=who]")).to_contain_text("read-only")
    await expect(page.locator("[data-testid=job-status]")).to_contain_text("dead")
    for testid in ("cancel", "replay"):
        await expect(page.locator(f"[data-testid={testid}]")).to_have_count(0)
    assert await page.locator("main form[method=post]").count() == 0

    await page.goto("/ui/jobs")
    await expect(page.locator(f"tr[data-testid=job-row][data-job-id='{job_id}']")).to_be_visible()
    for testid in ("bulk-cancel", "bulk-replay"):
        await expect(page.locator(f"[data-testid={testid}]")).to_have_count(0)

    await page.goto("/ui/dead-letters")
    await expect(page.locator(f"tr[data-testid=letter-row][data-job-id='{job_id}']")).to_be_visible()
    for testid in ("replay-selected", "resolve", "confirm-replay"):
        await expect(page.locator(f"[data-testid={testid}]")).to_have_count(0)
    assert await page.locator("main form[method=post]").count() == 0

    # The same POSTs the writer's buttons send, with this session's own valid token: 403, nothing changes.
    csrf = await csrf_of(page)
    forged = await page.request.post(replay_action, form={"csrf": csrf}, max_redirects=0)
    assert forged.status == 403, await forged.text()
    assert "jobs:write" in await forged.text()
    forged = await page.request.post(resolve_action, form={"csrf": csrf, "reason": "x"}, max_redirects=0)
    assert forged.status == 403, await forged.text()
    async with console.api("acme") as client:
        job = await get_job(client, None, job_id)
        assert (job["status"], job["replay_count"]) == ("dead", 0)
        assert (await letter_of(client, job_id))["id"] == letter["id"]  # still open


async def test_a_post_without_a_csrf_token_is_403(page: Page, console: Console) -> None:
    async with console.api("acme") as client:
        job_id = await dead_job(client)
        await sign_in(page, console.keys["acme"], f"/ui/jobs/{job_id}")
        action = await form_action(page, "replay")
        for form in ({}, {"csrf": "forged-token"}):
            refused = await page.request.post(action, form=form, max_redirects=0)
            assert refused.status == 403, await refused.text()
            assert "security token" in await refused.text()
        logout = await page.request.post("/ui/logout", form={}, max_redirects=0)
        assert logout.status == 403
        job = await get_job(client, None, job_id)
        assert (job["status"], job["replay_count"]) == ("dead", 0)
        await page.reload()
        await expect(page.locator("[data-testid=who]")).to_contain_text("acme")  # still signed in


async def test_another_tenants_job_answers_404(page: Page, console: Console) -> None:
    async with console.api("acme") as client:
        job_id = await dead_job(client)
    await sign_in(page, console.keys["acme"], f"/ui/jobs/{job_id}")
    action = await form_action(page, "replay")
    await page.context.clear_cookies()

    await sign_in(page, console.keys["globex"], "/ui")
    response = await page.goto(f"/ui/jobs/{job_id}")
    assert response is not None and response.status == 404
    await expect(page.locator("[data-testid=problem]")).to_be_visible()
    await expect(page.locator("[data-testid=job-status]")).to_have_count(0)
    assert "demo.flaky" not in await page.locator("main").inner_text()

    refused = await page.request.post(action, form={"csrf": await csrf_of(page)}, max_redirects=0)
    assert refused.status == 404
    await page.goto(f"/ui/jobs?q={job_id[:20]}")
    await expect(page.locator("tr[data-testid=job-row]")).to_have_count(0)
    async with console.api("acme") as client:
        assert (await get_job(client, None, job_id))["replay_count"] == 0


# ---- escaping --------------------------------------------------------------------------------------------


async def test_script_in_params_and_errors_renders_as_text(page: Page, console: Console) -> None:
    async with console.api("xss") as client:
        job_id = await submit_id(client, None, "browser.lookup", customer=XSS, job={"ordering_key": XSS})
        job = await wait_job(client, None, job_id, {"dead"})
        assert XSS in job["last_error"]["message"]
        await letter_of(client, job_id)
    await alerted(console, job_id)

    dialogs = Dialogs(page, accept=False)
    await sign_in(page, console.keys["xss"], f"/ui/jobs/{job_id}")
    await expect(page.locator("pre[data-testid=params]")).to_contain_text("<script>alert(1)</script>")
    await expect(page.locator("pre[data-testid=params]")).to_contain_text("<img src=x onerror=alert(1)>")
    await expect(page.locator("[data-testid=last-error]")).to_contain_text(f"customer {XSS} not found")
    await refreshes(page, 2)  # the in-place refresh parses the same text again
    await no_script_injected(page)

    job_row = f"tr[data-testid=job-row][data-job-id='{job_id}']"
    letter_row = f"tr[data-testid=letter-row][data-job-id='{job_id}']"
    for path, hook, text in (
        ("/ui/jobs", job_row, XSS),  # the ordering key column
        (f"/ui/jobs?ordering_key={quote(XSS)}", job_row, XSS),  # and in the filter field's value
        ("/ui/dead-letters", letter_row, f"customer {XSS} not found"),
        ("/ui/alerts", "[data-testid=deliveries]", job_id),
        ("/ui", "[data-testid=by-status]", "dead"),
    ):
        await page.goto(path)
        await expect(page.locator(hook)).to_contain_text(text)
        await refreshes(page)
        await no_script_injected(page)
        await expect(page.locator(hook)).to_contain_text(text)
    await page.goto(f"/ui/jobs?ordering_key={quote(XSS)}")
    assert await page.locator("form.filters input[name=ordering_key]").input_value() == XSS
    assert dialogs.seen == []


# ---- without JavaScript ----------------------------------------------------------------------------------


async def test_pages_read_with_javascript_disabled(browser: Browser, console: Console) -> None:
    async with console.api("nojs") as client:
        job_id = await submit_id(client, None, "demo.flaky", fail_times=1)
        await wait_job(client, None, job_id, {"done"})

    ctx = await new_context(browser, console.url, javascript=False)
    try:
        page = await ctx.new_page()
        await sign_in(page, console.keys["nojs"], "/ui")
        await expect(page.locator("[data-testid=by-status]")).to_be_visible()
        await expect(page.locator("[data-testid=throughput]")).to_be_visible()

        await page.goto("/ui/jobs?status=done")
        row = page.locator(f"tr[data-testid=job-row][data-job-id='{job_id}']")
        await expect(row).to_be_visible()
        async with page.expect_navigation():
            await row.locator(f"a[href='/ui/jobs/{job_id}']").first.click()

        await expect(page.locator("[data-testid=job-status]")).to_contain_text("done")
        await expect(page.locator("li[data-testid=attempt]")).to_have_count(2)
        await expect(page.locator("pre[data-testid=params]")).to_contain_text("fail_times")
        for path, hook in (("/ui/dead-letters", "main"), ("/ui/workers", "[data-testid=workers]")):
            await page.goto(path)
            await expect(page.locator(hook)).to_be_visible()
    finally:
        await ctx.close()


# ---- workers and alerts ----------------------------------------------------------------------------------


async def test_workers_and_alert_deliveries_are_listed(page: Page, console: Console) -> None:
    async with console.api("globex") as client:
        job_id = await dead_job(client)
    await alerted(console, job_id)

    await sign_in(page, console.keys["globex"], "/ui/workers")
    rows = page.locator("tr[data-testid=worker-row]")
    await expect(rows.filter(has_text="dead_letter")).to_have_count(1)
    await expect(rows.filter(has_text="scheduler")).to_have_count(1)
    assert await rows.count() == 3
    await shoot(page, "workers")

    await page.goto("/ui/alerts")
    delivery = page.locator("[data-testid=deliveries] tr", has_text=job_id)
    await expect(delivery).to_contain_text("dingtalk")
    await expect(delivery).to_contain_text("sent")
    await shoot(page, "alerts")


# ---- the docs' screenshots (docs/how-to/console.md) ------------------------------------------------------


async def test_every_page_with_realistic_data_for_the_readme(browser: Browser, console: Console) -> None:
    """One tenant with a morning's worth of jobs: done, retried, dead, running, scheduled and waiting; every
    page is shot, and no page breaks its own Content-Security-Policy."""
    async with console.api("demo") as client:
        for rows in (1200, 5000, 25_000, 80_000):
            await submit_id(client, None, "demo.csv", rows=rows)
        retried = await submit_id(client, None, "demo.flaky", fail_times=2)
        dead = [await dead_job(client) for _ in range(2)]
        blocked = await dead_job(client, ordering_key="invoice-2302")
        await submit_id(client, None, "demo.csv", rows=300, job={"ordering_key": "invoice-2302"})
        later = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
        await submit_id(client, None, "demo.csv", rows=50_000, job={"run_at": later})
        sleepers = [await submit_id(client, None, "demo.sleep", seconds=s) for s in (40, 90)]
        await wait_job(client, None, retried, {"done"})
        for job_id in sleepers:
            await running(client, job_id)
        await alerted(console, *dead, blocked)

        ctx = await new_context(browser, console.url)
        try:
            page = await ctx.new_page()
            violations: list[str] = []
            page.on(
                "console",
                lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None,
            )
            await sign_in(page, console.keys["demo"], "/ui", screenshot="login")
            for name, path, hook in (
                ("overview", "/ui", "[data-testid=running]"),
                ("jobs", "/ui/jobs", "tr[data-testid=job-row]"),
                ("job", f"/ui/jobs/{retried}", "li[data-testid=attempt]"),
                ("dead-letters", "/ui/dead-letters", "tr[data-testid=letter-row]"),
                ("workers", "/ui/workers", "tr[data-testid=worker-row]"),
                ("alerts", "/ui/alerts", "[data-testid=deliveries]"),
            ):
                await page.goto(path)
                await expect(page.locator(hook).first).to_be_visible()
                await refreshes(page)
                await shoot(page, name)
            assert violations == []
        finally:
            await ctx.close()
        for job_id in sleepers:
            await client.post(f"/v1/jobs/{job_id}/cancel")

    if update_readme_screenshots():
        for path in copy_to_readme():
            assert path.stat().st_size < 200_000, f"{path} is too large for the README"
