"""The console's job list and job page in a real Chromium: a new job appears without a reload, several are
cancelled at once, and one job's attempts, download, cancel and replay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.async_api import BrowserContext, Page, expect

from tests.utils.browser import Console, Dialogs, refreshes, shoot, sign_in
from tests.utils.browser_jobs import dead_job, running
from tests.utils.jobs import get_attempts, get_job, submit_id, wait_job

pytestmark = pytest.mark.timeout(180)
expect.set_options(timeout=15_000)


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
