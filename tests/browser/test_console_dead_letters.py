"""The console's dead-letter page in a real Chromium: bulk replay by report type and time, and resolving
a dead predecessor by hand so that the jobs waiting on its ordering key run."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from playwright.async_api import Page, expect

from tests.utils.browser import Console, Dialogs, shoot, sign_in
from tests.utils.browser_jobs import dead_job, letter_of
from tests.utils.jobs import get_job, submit_id, wait_job

pytestmark = pytest.mark.timeout(180)
expect.set_options(timeout=15_000)


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
