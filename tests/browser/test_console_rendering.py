"""Every console page in a real Chromium renders hostile params and errors as text, reads without
JavaScript and keeps its Content-Security-Policy; the last test shoots every page for docs/screenshots/."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest
from playwright.async_api import Browser, Page, expect

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
from tests.utils.browser_jobs import alerted, dead_job, letter_of, running
from tests.utils.jobs import submit_id, wait_job

pytestmark = pytest.mark.timeout(180)
expect.set_options(timeout=15_000)

XSS = '<script>alert(1)</script>"><img src=x onerror=alert(1)>'


async def no_script_injected(page: Page) -> None:
    """Nothing of XSS became markup: no dialog-prone element, no script with its code."""
    await expect(page.locator("img[src=x]")).to_have_count(0)
    assert await page.locator("[onerror]").count() == 0
    injected = await page.evaluate(
        "[...document.querySelectorAll('script')].filter(s => s.textContent.includes('alert(1)')).length"
    )
    assert injected == 0


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
