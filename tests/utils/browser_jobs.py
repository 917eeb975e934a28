"""Jobs for the browser tests, made through a tenant's API client on the e2e stack: dead ones with their
letters, running ones, and the DingTalk alerts the dead ones raise."""

from __future__ import annotations

from typing import Any

import httpx

from tests.utils.browser import Console
from tests.utils.jobs import submit_id, wait_job
from tests.utils.polling import eventually


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
