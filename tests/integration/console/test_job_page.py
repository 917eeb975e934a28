"""One job in the console: its fields, attempts as a timeline, steps, why it waits, the download, and the
cancel and replay actions (the API's own service calls and refusals, shown as readable pages)."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.utils.console import raw_key, sign_in
from tests.utils.console_pages import flash_after, href_of, post_actions, text_of, texts_of
from tests.utils.dead_letters import kill_permanently
from tests.utils.jobs import get_job, submit, submit_id, wait_job
from tests.utils.keys import bearer
from tests.utils.workers import drain


async def signed_in_writer(client: httpx.AsyncClient) -> tuple[dict[str, str], str]:
    key = await raw_key("acme")
    return bearer(key), await sign_in(client, key)


async def job_page(client: httpx.AsyncClient, job_id: str) -> str:
    page = await client.get(f"/ui/jobs/{job_id}")
    assert page.status_code == 200, page.text
    return page.text


async def test_a_retried_job_shows_every_field_and_each_attempt_on_its_timeline(
    client: httpx.AsyncClient, env: Any
) -> None:
    auth, _ = await signed_in_writer(client)
    job_id = await submit_id(client, auth, "demo.flaky", fail_times=1, job={"ordering_key": "acct-7"})
    await drain()
    page = await job_page(client, job_id)
    assert text_of(page, "job-status") == "done"
    assert text_of(page, "params") == '{ "fail_times": 1, "permanent": false }'
    assert '<pre data-testid="params">{\n  &#34;fail_times&#34;: 1,' in page  # indented JSON
    assert text_of(page, "ordering-key") == "acct-7"
    assert text_of(page, "waits-for") == "Not waiting: it is done."
    assert text_of(page, "last-error") == "—"
    first, second = texts_of(page, "attempt")
    assert first.startswith("#1 failed on ") and "RuntimeError: demo.flaky failing attempt 1 of 1" in first
    assert second.startswith("#2 succeeded on ") and "took" in second
    assert 'class="timeline" data-testid="attempts"' in page
    for field in (
        "report type",
        "tenant",
        "replays",
        "progress",
        "created",
        "finished",
        "trace id",
        "callback",
    ):
        assert f"<dt>{field}</dt>" in page
    assert 'data-testid="cancel"' not in page and 'data-testid="replay"' not in page  # done: nothing to do


async def test_the_download_is_the_apis_file_under_the_same_name(client: httpx.AsyncClient, env: Any) -> None:
    auth, _ = await signed_in_writer(client)
    job_id = await submit_id(client, auth, "demo.csv", rows=3)
    await drain()
    link = href_of(await job_page(client, job_id), "download")
    assert link == f"/ui/jobs/{job_id}/output"
    console, api = await client.get(link), await client.get(f"/v1/jobs/{job_id}/output", headers=auth)
    assert console.status_code == api.status_code == 200
    assert console.content == api.content and console.content.startswith(b"id,name,value\r\n")
    for header in ("content-type", "content-disposition"):
        assert console.headers[header] == api.headers[header]
    assert f'filename="demo-{job_id}.csv"' in console.headers["content-disposition"]

    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    waiting = await submit_id(client, auth, "demo.csv", rows=3, job={"run_at": later})
    not_yet = await client.get(f"/ui/jobs/{waiting}/output")
    assert not_yet.status_code == 409 and "its output exists once it is done" in not_yet.text


async def test_cancelling_a_scheduled_job_from_its_page_cancels_it_and_says_so(
    client: httpx.AsyncClient, env: Any
) -> None:
    auth, csrf = await signed_in_writer(client)
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    job_id = await submit_id(client, auth, "demo.csv", rows=1, job={"run_at": later})
    page = await job_page(client, job_id)
    assert text_of(page, "waits-for").startswith("Scheduled: starts at ")
    assert f"/ui/jobs/{job_id}/cancel" in post_actions(page) and 'data-testid="replay"' not in page

    resp = await client.post(f"/ui/jobs/{job_id}/cancel", data={"csrf": csrf})
    assert resp.headers["location"] == f"/ui/jobs/{job_id}"
    page, flash = await flash_after(client, resp)
    assert flash == f"Job {job_id} cancelled."
    assert text_of(page, "job-status") == "cancelled"
    assert 'data-testid="cancel"' not in page and 'data-testid="replay"' in page
    assert (await get_job(client, auth, job_id))["status"] == "cancelled"

    again = await client.post(f"/ui/jobs/{job_id}/cancel", data={"csrf": csrf})
    assert again.status_code == 409  # the API's refusal, as a readable page
    assert text_of(again.text, "problem").startswith(f"Conflict Job {job_id} is already cancelled.")


async def test_cancelling_a_running_job_asks_it_to_stop_and_it_ends_cancelled(
    client: httpx.AsyncClient, env: Any
) -> None:
    auth, csrf = await signed_in_writer(client)
    job_id = await submit_id(client, auth, "demo.sleep", seconds=20)
    worker = asyncio.create_task(drain(burst=False, timeout_s=30))
    try:
        await wait_job(client, auth, job_id, {"running"})
        page = await job_page(client, job_id)
        assert text_of(page, "waits-for").startswith("Not waiting: running on ")
        resp = await client.post(f"/ui/jobs/{job_id}/cancel", data={"csrf": csrf})
        page, flash = await flash_after(client, resp)
        assert flash == f"Cancel requested: job {job_id} stops at its next heartbeat."
        assert "Cancel requested: it stops at its next heartbeat." in text_of(page, "waits-for")
        assert 'data-testid="cancel"' not in page
        await wait_job(client, auth, job_id, {"cancelled"}, within_s=10)
    finally:
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
    page = await job_page(client, job_id)
    assert texts_of(page, "attempt")[-1].startswith("#1 cancelled on ")


async def test_replaying_a_dead_job_from_its_page_runs_it_again(client: httpx.AsyncClient, env: Any) -> None:
    auth, csrf = await signed_in_writer(client)
    [job_id] = await kill_permanently(client, auth)
    page = await job_page(client, job_id)
    assert text_of(page, "job-status") == "dead"
    assert text_of(page, "last-error") == "PermanentError: demo.flaky failing attempt 1 of 1"
    assert f"/ui/jobs/{job_id}/replay" in post_actions(page) and 'name="steps"' not in page

    resp = await client.post(f"/ui/jobs/{job_id}/replay", data={"csrf": csrf})
    _, flash = await flash_after(client, resp)
    assert flash == f"Job {job_id} replayed: it is pending again."
    await drain()
    page = await job_page(client, job_id)
    assert text_of(page, "job-status") == "done"
    assert texts_of(page, "attempt")[-1].startswith("#1 (replay 1) succeeded on ")

    again = await client.post(f"/ui/jobs/{job_id}/replay", data={"csrf": csrf})
    assert again.status_code == 409 and "only dead or cancelled jobs can be replayed" in again.text


async def test_a_multi_step_job_shows_its_steps_and_replays_the_chosen_ones(
    client: httpx.AsyncClient, env: Any
) -> None:
    auth, csrf = await signed_in_writer(client)
    job = await submit(client, auth, "demo.steps", fail_step="charge", fail_times=1)
    await drain()
    page = await job_page(client, job["id"])
    assert text_of(page, "job-status") == "dead"
    steps = texts_of(page, "step")
    assert [s.split()[0] for s in steps] == ["generate", "upload", "notify", "charge"]
    assert steps[-1].startswith("charge manual failed 1")
    for name in ("generate", "upload", "notify", "charge"):
        assert f'name="steps" value="{name}"' in page

    unknown = await client.post(f"/ui/jobs/{job['id']}/replay", data={"csrf": csrf, "steps": "bill"})
    assert unknown.status_code == 422 and "Unknown steps." in unknown.text
    resp = await client.post(f"/ui/jobs/{job['id']}/replay", data={"csrf": csrf, "steps": ["charge"]})
    _, flash = await flash_after(client, resp)
    assert flash == f"Job {job['id']} replayed (steps: charge): it is pending again."
    await drain()
    page = await job_page(client, job["id"])
    assert text_of(page, "job-status") == "done"
    assert texts_of(page, "step")[-1].startswith("charge manual succeeded 2")


async def test_a_job_held_back_by_its_ordering_key_links_to_the_job_it_waits_for(
    client: httpx.AsyncClient, env: Any
) -> None:
    auth, _ = await signed_in_writer(client)
    key = {"ordering_key": "acct-9"}
    dead = await submit_id(client, auth, "demo.flaky", job=key, fail_times=1, permanent=True)
    waiting = await submit_id(client, auth, "demo.csv", job=key, rows=1)
    await drain()
    page = await job_page(client, waiting)
    assert href_of(page, "blocked-by") == f"/ui/jobs/{dead}"
    assert text_of(page, "waits-for").startswith(f"Waits for job {dead}, submitted earlier with the same")
    dead_page = await job_page(client, dead)
    assert "stay blocked until it is replayed or its dead letter is resolved" in text_of(
        dead_page, "waits-for"
    )
