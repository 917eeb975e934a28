"""In a real Chromium against a real stack: a destination added through the console's form (its secret never
on any page), a report delivered to it, shown on the job's page and sent again with Resend; the key-free
download link opens the file, and a tampered or expired one shows a readable page.
"""

from __future__ import annotations

import httpx
from playwright.async_api import Page, expect

from tests.utils.browser import Console, shoot, sign_in
from tests.utils.fakes.receiver import Receiver
from tests.utils.jobs import submit_id, wait_job
from tests.utils.polling import eventually

SECRET = "console-webhook-secret-0123456789"


async def deliveries_of(client: httpx.AsyncClient, job_id: str) -> list[dict[str, object]]:
    resp = await client.get(f"/v1/jobs/{job_id}/deliveries")
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


async def test_add_a_destination_deliver_a_report_and_resend_it(page: Page, console: Console) -> None:
    receiver = Receiver(secret=SECRET).start()
    try:
        await sign_in(page, console.keys["deliver"], "/ui/destinations")
        await expect(page.locator("[data-testid=no-destinations]")).to_be_visible()
        form = page.locator("[data-testid=add-webhook]")
        await form.locator("summary").click()
        await form.locator("input[name=name]").fill("warehouse-hook")
        await form.locator("input[name=url]").fill(receiver.url)
        await form.locator("input[name=secret]").fill(SECRET)
        async with page.expect_navigation():
            await form.locator("[data-testid=create-webhook]").click()
        await expect(page.locator("[data-testid=flash]")).to_contain_text("warehouse-hook (webhook) added")
        row = page.locator("[data-testid=destination]", has_text="warehouse-hook")
        await expect(row).to_contain_text("127.0.0.1")
        await expect(row).to_contain_text("secret")
        assert SECRET not in await page.content()
        await shoot(page, "destinations")

        async with console.api("deliver") as client:
            job = {"deliver_to": [{"destination": "warehouse-hook"}]}
            job_id = await submit_id(client, None, "demo.csv", rows=5, job=job)
            await wait_job(client, None, job_id, {"done"})
            await eventually(lambda: len(receiver.accepted) == 1, 20, "the report delivered", 0.1)
            link = str(receiver.accepted[0].body["link"])

        await page.goto(f"/ui/jobs/{job_id}")
        delivery = page.locator("[data-testid=delivery]")
        await expect(delivery).to_contain_text("warehouse-hook")
        await expect(delivery.locator("[data-testid=delivery-status]")).to_contain_text("sent")
        await shoot(page, "job-deliveries")
        async with page.expect_navigation():
            await delivery.locator("[data-testid=resend]").click()
        await expect(page.locator("[data-testid=flash]")).to_contain_text("sent again")
        await eventually(lambda: len(receiver.accepted) == 2, 20, "the report sent again", 0.1)
    finally:
        receiver.stop()

    # The link needs no key: a fresh browser context (no session) downloads the file through it.
    path = httpx.URL(link).raw_path.decode()
    async with httpx.AsyncClient(base_url=console.url) as anonymous:
        resp = await anonymous.get(path)
    assert resp.status_code == 200 and resp.content.startswith(b"id,name,value")
    tampered = path.replace("sig=", "sig=A", 1)
    answer = await page.goto(tampered)
    assert answer is not None and answer.status == 403
    await expect(page.locator("body")).to_contain_text("This download link is not valid")
    await shoot(page, "link-refused")
