"""HTTP report types against a real local service (which checks our signature), a real MariaDB, Redis and
arq worker: the sync answer and the async upload become the job's file; 4xx is permanent, 5xx retried; a
private address needs an allow-list entry; a silent or failing service fails the attempt as it says."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.utils.fakes.report_service import CSV, FakeReportService
from tests.utils.http_reports import callback_path, http_type, register_http_type
from tests.utils.jobs import get_attempts, submit_id, wait_job
from tests.utils.workers import drain


def declare(
    monkeypatch: pytest.MonkeyPatch, service: FakeReportService, mode: str = "sync", **table: Any
) -> str:
    url = table.pop("url", f"{service.url}/reports/{{region}}?year={{year}}")
    return register_http_type(monkeypatch, http_type(f"t.http.{mode}", url, mode, **table)).name


async def download(client: httpx.AsyncClient, auth: dict[str, str], job_id: str) -> httpx.Response:
    resp = await client.get(f"/v1/jobs/{job_id}/output", headers=auth)
    assert resp.status_code == 200, resp.text
    return resp


async def test_a_sync_http_report_ends_done_with_the_services_file_downloadable(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    service: FakeReportService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = declare(monkeypatch, service, headers={"X-Region": "{region}"})
    job_id = await submit_id(client, auth, name, region="south/east")
    await drain()
    job = await wait_job(client, auth, job_id)
    assert job["status"] == "done", job
    [call] = service.calls
    assert call.signature_ok and call.method == "POST"
    assert call.path == "/reports/south%2Feast?year=2026"  # the value stays inside its segment
    assert call.headers["x-region"] == "south/east"
    assert call.envelope["job_id"] == job_id and call.envelope["attempt"] == 1
    assert call.envelope["params"] == {"region": "south/east", "year": 2026}
    assert call.envelope["tenant"] and "callback" not in call.envelope
    assert job["output"]["filename"] == "sales-south-east.csv"
    assert job["output"]["content_type"].startswith("text/csv")
    resp = await download(client, auth, job_id)
    assert resp.content == CSV


async def test_a_get_http_report_is_signed_over_its_query(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    service: FakeReportService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = declare(monkeypatch, service, method="GET")
    job_id = await submit_id(client, auth, name, region="west")
    await drain()
    assert (await wait_job(client, auth, job_id))["status"] == "done"
    [call] = service.calls
    assert call.method == "GET" and call.signature_ok
    assert call.envelope["job_id"] == job_id and call.envelope["params"] == {"region": "west", "year": 2026}


async def test_a_4xx_answer_is_dead_after_one_attempt_with_the_status_and_body(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    service: FakeReportService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = declare(monkeypatch, service)
    service.script = ["http404"]
    job_id = await submit_id(client, auth, name)
    await drain()
    job = await wait_job(client, auth, job_id)
    assert job["status"] == "dead" and job["attempt"] == 1, job
    error = job["last_error"]
    assert error["type"] == "PermanentError" and error["retryable"] is False
    assert "answered 404" in error["message"] and "http404" in error["message"]
    assert len(service.calls) == 1


async def test_5xx_and_429_answers_are_retried_then_done(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    service: FakeReportService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = declare(monkeypatch, service)
    service.script = ["http500", "http429"]
    job_id = await submit_id(client, auth, name)
    await drain()
    job = await wait_job(client, auth, job_id)
    assert job["status"] == "done" and job["attempt"] == 3, job
    history = await get_attempts(client, auth, job_id)
    assert [a["outcome"] for a in history] == ["failed", "failed", "succeeded"]
    assert [a["error"]["retryable"] for a in history[:2]] == [True, True]
    assert "answered 500" in history[0]["error"]["message"]
    assert (await download(client, auth, job_id)).content == CSV


async def test_a_private_address_without_an_allow_list_entry_is_refused_before_any_request(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    service: FakeReportService,
    monkeypatch: pytest.MonkeyPatch,
    env: Any,
) -> None:
    await env.set(
        HTTP_REPORT_ALLOWED_HOSTS="", CALLBACK_ALLOWED_HOSTS="127.0.0.1"
    )  # callbacks' list: not ours
    name = declare(monkeypatch, service)
    job_id = await submit_id(client, auth, name)
    await drain()
    job = await wait_job(client, auth, job_id)
    assert job["status"] == "dead" and job["attempt"] == 1, job
    message = job["last_error"]["message"]
    assert "non-public address (127.0.0.1)" in message and "HTTP_REPORT_ALLOWED_HOSTS" in message
    assert service.calls == []


async def run_async(
    client: httpx.AsyncClient, auth: dict[str, str], service: FakeReportService, name: str
) -> tuple[str, asyncio.Task[None]]:
    """Submit an async HTTP job and start a worker; returns once the service was called."""
    service.script = ["accept"]
    job_id = await submit_id(client, auth, name)
    worker = asyncio.create_task(drain(timeout_s=30))
    await service.calls_made(1)
    return job_id, worker


async def test_an_async_http_report_ends_done_with_the_file_the_service_uploads(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    service: FakeReportService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = declare(monkeypatch, service, "async")
    job_id, worker = await run_async(client, auth, service, name)
    [call] = service.calls
    assert call.signature_ok and call.envelope["callback"]["heartbeat_timeout_s"] == 60
    beat = await client.post(callback_path(call, "heartbeat"), json={"progress": 0.5})
    assert beat.status_code == 200 and beat.json() == {"cancel": False}
    running = await wait_job(client, auth, job_id, {"running"})
    upload = await client.post(
        callback_path(call, "complete"),
        params={"filename": "../sales 2026.xlsx", "rows": 7},
        content=b"PK\x03\x04 not really a workbook",
        headers={"Content-Type": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
    )
    assert upload.status_code == 202, upload.text
    await worker
    job = await wait_job(client, auth, job_id)
    assert running["status"] == "running"
    assert job["status"] == "done", job
    assert job["output"]["filename"] == "sales_2026.xlsx"
    assert job["output"]["content_type"].endswith("spreadsheetml.sheet")
    resp = await download(client, auth, job_id)
    assert resp.content == b"PK\x03\x04 not really a workbook"
    assert 'filename="sales_2026.xlsx"' in resp.headers["content-disposition"]


async def test_an_async_failure_reported_permanent_is_dead_after_one_attempt(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    service: FakeReportService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = declare(monkeypatch, service, "async")
    job_id, worker = await run_async(client, auth, service, name)
    failed = await client.post(callback_path(service.calls[0], "fail"), json={"message": "no data for 2026"})
    assert failed.status_code == 202, failed.text
    await worker
    job = await wait_job(client, auth, job_id)
    assert job["status"] == "dead" and job["attempt"] == 1, job
    assert "no data for 2026" in job["last_error"]["message"] and job["last_error"]["retryable"] is False


async def test_a_silent_async_service_fails_the_attempt_as_retryable(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    service: FakeReportService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = declare(monkeypatch, service, "async", heartbeat_timeout_s=0.6, max_attempts=1)
    job_id, worker = await run_async(client, auth, service, name)
    await worker
    job = await wait_job(client, auth, job_id)
    assert job["status"] == "dead", job
    error = job["last_error"]
    assert error["type"] == "HttpReportError" and error["retryable"] is True and "silent" in error["message"]
