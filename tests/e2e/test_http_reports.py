"""Asynchronous HTTP reports with real api, worker and scheduler processes and a real local service (which
checks our signature): a SIGKILLed worker's attempt is declared lost and the next one calls the service
again, whose old token is then refused; a cancel reaches the service at its next heartbeat."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.utils.fakes.report_service import FakeReportService
from tests.utils.http_reports import demo_service
from tests.utils.jobs import cancel, get_attempts, get_job, submit_id, wait_job
from tests.utils.polling import eventually
from tests.utils.stack import Proc, Stack

pytestmark = pytest.mark.timeout(120)

DEMO_SECRET = "demo-secret-for-the-e2e-tests"


@pytest.fixture
def service() -> Iterator[FakeReportService]:
    fake = FakeReportService(script=["accept"] * 5).start()
    yield fake
    fake.stop()


def start(stack: Stack, service: FakeReportService, workers: int = 1) -> list[Proc]:
    stack.overrides.update(
        REPORT_MODULES="tests.utils.http_reports",
        TEST_REPORT_SERVICE_URL=service.url,
        HTTP_REPORT_ALLOWED_HOSTS="127.0.0.1",
    )
    stack.start_api()
    stack.overrides["PUBLIC_BASE_URL"] = stack.api_url  # where the service reports back
    stack.start_scheduler()
    return [stack.start_worker() for _ in range(workers)]


def on_api(stack: Stack, url: str) -> str:
    assert url.startswith(stack.api_url), url
    return url[len(stack.api_url) :]


async def test_an_async_http_report_survives_a_sigkilled_worker_and_refuses_the_old_attempts_upload(
    stack: Stack, service: FakeReportService
) -> None:
    workers = start(stack, service, workers=2)
    async with stack.client() as client, httpx.AsyncClient(base_url=stack.api_url, trust_env=False) as peer:
        job_id = await submit_id(client, None, "test.http.async", region="north")
        [first] = await service.calls_made(1)
        beat = await peer.post(on_api(stack, first.callback["heartbeat_url"]))
        assert beat.status_code == 200 and beat.json() == {"cancel": False}
        victim = stack.proc_by_pid(int(await eventually(lambda: stack.job_worker_pid(job_id), 10, "running")))
        assert victim in workers
        victim.kill()

        second = (await service.calls_made(2, within_s=30))[1]  # lost, retried: the service is called again
        assert second.envelope["attempt"] == 2 and second.signature_ok and first.signature_ok
        late = await peer.post(
            on_api(stack, first.callback["complete_url"]), params={"filename": "old.csv"}, content=b"old"
        )
        assert late.status_code == 410 and late.json()["cancel"] is True, late.text
        done = await peer.post(
            on_api(stack, second.callback["complete_url"]),
            params={"filename": "north.csv", "rows": 1},
            content=b"region\nnorth\n",
            headers={"Content-Type": "text/csv"},
        )
        assert done.status_code == 202, done.text
        job = await wait_job(client, None, job_id, within_s=30)
        assert job["status"] == "done" and job["output"]["filename"] == "north.csv", job
        output = await client.get(f"/v1/jobs/{job_id}/output")
        assert output.status_code == 200 and output.content == b"region\nnorth\n"
        history = await get_attempts(client, None, job_id)
    assert [a["outcome"] for a in history] == ["lost", "succeeded"], history


async def test_an_async_http_report_honours_a_cancel_at_the_services_next_heartbeat(
    stack: Stack, service: FakeReportService
) -> None:
    start(stack, service)
    async with stack.client() as client, httpx.AsyncClient(base_url=stack.api_url, trust_env=False) as peer:
        job_id = await submit_id(client, None, "test.http.async", region="south")
        [call] = await service.calls_made(1)
        await wait_job(client, None, job_id, {"running"})
        await cancel(client, None, job_id)
        beat = await peer.post(on_api(stack, call.callback["heartbeat_url"]))
        assert beat.status_code in (200, 410) and beat.json()["cancel"] is True, beat.text
        job = await wait_job(client, None, job_id, within_s=15)
        assert job["status"] == "cancelled", job
        after = await peer.post(on_api(stack, call.callback["heartbeat_url"]))
        assert after.status_code == 410 and after.json()["cancel"] is True
        assert [a["outcome"] for a in await get_attempts(client, None, job_id)] == ["cancelled"]


async def test_the_async_example_runs_against_the_demo_service_with_progress_and_upload(
    stack: Stack, service: FakeReportService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEMO_REPORT_SERVICE_SECRET", DEMO_SECRET)  # the demo service runs in this process
    with demo_service() as port:
        stack.overrides.update(TEST_DEMO_SERVICE_PORT=str(port), DEMO_REPORT_SERVICE_SECRET=DEMO_SECRET)
        start(stack, service)
        async with stack.client() as client:
            job_id = await submit_id(client, None, "demo.http.sales_async", region="west", rows=40)
            progress = await eventually(
                lambda: _progress(client, job_id), 15, "progress reported by the demo service", 0.1
            )
            job = await wait_job(client, None, job_id, within_s=30)
            output = await client.get(f"/v1/jobs/{job_id}/output")
    assert 0 < progress < 1
    assert job["status"] == "done" and job["output"]["filename"] == "sales-west.csv", job
    assert output.text.count("\n") == 41  # the header and 40 rows


async def _progress(client: httpx.AsyncClient, job_id: str) -> float | None:
    job = await get_job(client, None, job_id)
    return job["progress"] if job["progress"] and job["status"] == "running" else None
