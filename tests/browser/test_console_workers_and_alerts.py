"""The console's workers and alerts pages in a real Chromium: every live process of the stack is listed, and a
dead job's DingTalk alert delivery shows as sent."""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect

from tests.utils.browser import Console, shoot, sign_in
from tests.utils.browser_jobs import alerted, dead_job

pytestmark = pytest.mark.timeout(180)
expect.set_options(timeout=15_000)


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
