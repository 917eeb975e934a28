"""Review, session 13, with real api, worker and scheduler processes and the fake team service: an
asynchronous HTTP report's attempt whose worker is SIGKILLed or SIGTERMed while the service works. Each test
failed on review30 (cecda50)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from tests.utils.fakes.report_service import FakeReportService
from tests.utils.jobs import get_attempts, get_job, submit_id, wait_job
from tests.utils.polling import eventually
from tests.utils.stack import Stack

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def service() -> Iterator[FakeReportService]:
    fake = FakeReportService(script=["accept"] * 5).start()
    yield fake
    fake.stop()


def start(stack: Stack, service: FakeReportService, heartbeat_timeout_s: float) -> None:
    """api and scheduler; `test.http.async` fails after `heartbeat_timeout_s` of the service's silence."""
    stack.overrides.update(
        REPORT_MODULES="tests.utils.http_reports",
        TEST_REPORT_SERVICE_URL=service.url,
        HTTP_REPORT_ALLOWED_HOSTS="127.0.0.1",
        TEST_HEARTBEAT_TIMEOUT_S=str(heartbeat_timeout_s),
    )
    stack.start_api()
    stack.overrides["PUBLIC_BASE_URL"] = stack.api_url  # where the service reports back
    stack.start_scheduler()


def on_api(stack: Stack, url: str) -> str:
    assert url.startswith(stack.api_url), url
    return url[len(stack.api_url) :]


async def test_an_async_attempt_handed_back_at_sigterm_reaches_a_service_that_honours_idempotency_keys(
    stack: Stack, service: FakeReportService
) -> None:
    """1. attempt 1 of `test.http.async` (max_attempts 1) runs on W1: the service gets the call
       (Idempotency-Key <job>-r0-a1), answers 202, starts the work and heartbeats under its token (n1);
    2. W1 gets SIGTERM and the report outlives WORKER_SHUTDOWN_GRACE_S: attempt 1 is handed back unburnt;
    3. W2 runs attempt 1 again: new token n2, same Idempotency-Key ("the same on a repeated call of one
       attempt", docs/how-to/http-reports.md);
    4. the service honours the key: the call is a repeat of the work it has under way, so it answers 202
       and goes on under n1, whose next heartbeat is 410 `cancel: true`: it stops. n2 reaches no work, W2
       hears nothing for heartbeat_timeout_s, and the job is dead though nothing failed."""
    start(stack, service, heartbeat_timeout_s=4)
    worker = stack.start_worker(WORKER_SHUTDOWN_GRACE_S="1")
    async with stack.client() as client, httpx.AsyncClient(base_url=stack.api_url, trust_env=False) as peer:
        job_id = await submit_id(client, None, "test.http.async", job={"max_attempts": 1}, region="north")
        [first] = await service.calls_made(1)
        assert (await peer.post(on_api(stack, first.callback["heartbeat_url"]))).status_code == 200
        code = await asyncio.to_thread(worker.terminate, 15)
        assert code == 0, worker.tail()
        handed_back = await get_job(client, None, job_id)
        assert (handed_back["status"], handed_back["attempt"]) == ("pending", 0), handed_back

        stack.start_worker()
        second = (await service.calls_made(2, within_s=30))[1]
        assert second.envelope["attempt"] == 1 and second.callback["url"] != first.callback["url"]
        if second.headers["idempotency-key"] == first.headers["idempotency-key"]:
            beat = await peer.post(on_api(stack, first.callback["heartbeat_url"]))  # the work under way
            assert beat.status_code == 410 and beat.json()["cancel"] is True, beat.text
        else:
            done = await peer.post(
                on_api(stack, second.callback["complete_url"]),
                params={"filename": "north.csv"},
                content=b"region\nnorth\n",
            )
            assert done.status_code == 202, done.text
        job = await wait_job(client, None, job_id, within_s=30)
    assert job["status"] == "done", job


async def test_an_upload_accepted_after_its_worker_was_sigkilled_is_the_jobs_output(
    stack: Stack, service: FakeReportService
) -> None:
    """1. attempt 1 of `test.http.async` (max_attempts 2) runs on W1; the service answers 202 and works;
    2. W1 is SIGKILLed; the job is still `running`, attempt 1, until the stuck scan sees the silence
       (STUCK_AFTER_S: 6 minutes by default);
    3. meanwhile the service finishes and uploads: the attempt is running and its run's row has no outcome,
       so the file is stored and answered 202 `{"accepted": true}` ("the job finishes shortly");
    4. the stuck scan declares attempt 1 lost without looking at remote_attempts: the reported outcome is
       dropped (its file nobody's), attempt 2 calls the service again, which has delivered this report
       already and stays silent: the job is dead though its report was delivered and accepted."""
    start(stack, service, heartbeat_timeout_s=3)
    workers = [stack.start_worker(), stack.start_worker()]
    async with stack.client() as client, httpx.AsyncClient(base_url=stack.api_url, trust_env=False) as peer:
        job_id = await submit_id(client, None, "test.http.async", job={"max_attempts": 2}, region="north")
        [first] = await service.calls_made(1)
        victim = stack.proc_by_pid(int(await eventually(lambda: stack.job_worker_pid(job_id), 10, "running")))
        assert victim in workers
        victim.kill()
        upload = await peer.post(
            on_api(stack, first.callback["complete_url"]),
            params={"filename": "north.csv", "rows": 1},
            content=b"region\nnorth\n",
            headers={"Content-Type": "text/csv"},
        )
        job = await wait_job(client, None, job_id, within_s=40)
        history = await get_attempts(client, None, job_id)
    if upload.status_code == 202:
        assert job["status"] == "done" and job["output"]["filename"] == "north.csv", (job, history)
        assert len(service.calls) == 1, [c.envelope["attempt"] for c in service.calls]
    else:  # the loss was declared first: the service is told to stop, and the next attempt calls it again
        assert upload.status_code == 410, upload.text
