"""Signing in to the console with a key in a real Chromium, and what a key may do there: a read-only key
sees no buttons, a POST without its scope or CSRF token is 403, and another tenant's job answers 404."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from playwright.async_api import Browser, BrowserContext, Page, expect

from tests.utils.browser import Console, new_context, shoot, sign_in
from tests.utils.browser_jobs import dead_job, letter_of
from tests.utils.jobs import get_job

pytestmark = pytest.mark.timeout(180)
expect.set_options(timeout=15_000)


async def form_action(page: Page, button_testid: str, within: str = "main") -> str:
    """The action of the form holding a button (so forged POSTs go where the real ones go)."""
    form = page.locator(within).locator(f"form:has([data-testid={button_testid}])").first
    action = await form.get_attribute("action")
    assert action, f"the {button_testid} form has no action"
    return action


async def csrf_of(page: Page) -> str:
    """This session's CSRF token, as every form on the page carries it."""
    return await page.locator("input[name=csrf]").first.input_value()


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
