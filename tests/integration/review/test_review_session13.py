"""Review, session 13: HTTP report types (issue 30) attacked at unlucky moments against the suite's real
MariaDB and Redis, with the fake team service (a real local HTTP server) played by the test. Each test names
what should hold; each failed on review30 (cecda50). (The ordering keys' recorded blockers held up: see the
review's report.)

A worker's shutdown past its grace is the CancelledError its delivery gets (`run_job` cancelled): the runner
hands the attempt back unburnt (`release_attempt`, pending again, attempt - 1), and the next delivery runs the
same attempt number again with a new nonce (app/reports/remote.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.attempts.rescue import declare_lost
from app.attempts.runner import run_job
from app.reports import remote
from app.reports.declared.errors import DeclarationError
from app.reports.remote_repository import RemoteAttemptRepository
from tests.utils.fakes.report_service import FakeReportService
from tests.utils.http_reports import callback_path, http_type, register_http_type
from tests.utils.jobs import get_job, submit_id, wait_job
from tests.utils.workers import drain

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def service(env: Any) -> AsyncIterator[FakeReportService]:
    await env.set(HTTP_REPORT_ALLOWED_HOSTS="127.0.0.1")
    fake = FakeReportService().start()
    yield fake
    fake.stop()


def declare(monkeypatch: pytest.MonkeyPatch, service: FakeReportService, mode: str, url: str = "") -> str:
    """An HTTP type against the fake; async ones fail after 1 s of silence from the service."""
    table: dict[str, Any] = {"heartbeat_timeout_s": 1} if mode == "async" else {}
    url = url or f"{service.url}/reports/{{region}}"
    return register_http_type(monkeypatch, http_type(f"r13.http.{mode}", url, mode, **table)).name


async def shut_down(delivery: asyncio.Task[Any]) -> None:
    """The worker stops past its grace: its delivery is cancelled, the attempt handed back."""
    delivery.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await delivery


async def test_a_result_the_service_uploaded_before_a_shutdown_hand_back_is_not_thrown_away(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    service: FakeReportService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Interleaving:
    1. attempt 1 of an async HTTP job runs on W1 (nonce n1); the service answers 202, does the work and
       uploads the file to its complete URL: 202 `{"accepted": true}` ("the job finishes shortly"), the file
       stored, remote_attempts (job, 0, 1) = succeeded with its path;
    2. W1 is told to stop before its next poll of that row (it polls every 0.25-0.5 s; the gate below only
       pins the stop inside that window): the runner hands attempt 1 back, the job is pending, attempt 0;
    3. W2 runs attempt 1 again: `hand_over` DELETEs the row carrying the accepted result (its file is left
       in the store, nobody's) and calls the service again with a new token;
    4. the service already delivered this report (same job, same attempt, same Idempotency-Key) and says
       nothing more: the attempt fails after heartbeat_timeout_s, and with max_attempts 1 the job is dead.
    A result we accepted is lost and the service is asked twice for one attempt."""
    name = declare(monkeypatch, service, "async")
    service.script = ["accept", "accept"]
    polls = asyncio.Event()
    real_poll = remote.poll

    async def poll_when_let(job_id: str, replay: int, attempt: int) -> Any:
        await polls.wait()  # W1's next poll comes after its shutdown
        return await real_poll(job_id, replay, attempt)

    monkeypatch.setattr(remote, "poll", poll_when_let)
    job_id = await submit_id(client, auth, name, job={"max_attempts": 1})
    w1 = asyncio.create_task(run_job(job_id, "w1"))
    [call] = await service.calls_made(1)
    upload = await client.post(callback_path(call, "complete"), params={"filename": "a.csv"}, content=b"a\n")
    assert upload.status_code == 202, upload.text
    await shut_down(w1)
    handed_back = await get_job(client, auth, job_id)
    assert (handed_back["status"], handed_back["attempt"]) == ("pending", 0), handed_back

    polls.set()
    await drain(timeout_s=30)  # W2: attempt 1 again
    job = await wait_job(client, auth, job_id)
    assert job["status"] == "done", job  # the file accepted in step 1 is the job's output ...
    assert job["output"]["filename"] == "a.csv", job
    assert len(service.calls) == 1, [c.path for c in service.calls]  # ... and the service was asked once


async def test_the_rerun_of_a_handed_back_attempt_reaches_a_service_that_honours_idempotency_keys(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    service: FakeReportService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Interleaving:
    1. attempt 1 runs on W1: the service gets the call (Idempotency-Key <job>-r0-a1, token n1), answers 202
       and starts the work; its heartbeat is taken;
    2. W1 shuts down past its grace: attempt 1 is handed back unburnt;
    3. W2 runs attempt 1 again: a new token (n2) in the body, but the same Idempotency-Key, which the how-to
       documents as "the same on a repeated call of one attempt";
    4. a service that honours the key (as the header asks) answers the repeat with its first answer and goes
       on with the work it has under way, under n1: its next heartbeat is 410 `cancel: true` ("an earlier run
       of attempt 1"), so it stops; n2 was never handed to any work. W2 hears nothing: after
       heartbeat_timeout_s the attempt fails, and with max_attempts 1 the job is dead.
    Nothing failed, yet the job is dead (with attempts left, one is burnt and the service runs it twice)."""
    name = declare(monkeypatch, service, "async")
    service.script = ["accept", "accept"]
    job_id = await submit_id(client, auth, name, job={"max_attempts": 1})
    w1 = asyncio.create_task(run_job(job_id, "w1"))
    [first] = await service.calls_made(1)
    assert (await client.post(callback_path(first, "heartbeat"))).status_code == 200
    await shut_down(w1)

    w2 = asyncio.create_task(drain(timeout_s=30))
    second = (await service.calls_made(2))[1]
    if second.headers["idempotency-key"] == first.headers["idempotency-key"]:
        # A repeat of work under way: the service keeps working under the token it has.
        beat = await client.post(callback_path(first, "heartbeat"))
        assert beat.status_code == 410 and beat.json()["cancel"] is True, beat.text
    else:
        # New work: the service does it and uploads through the new call's URL.
        done = await client.post(
            callback_path(second, "complete"), params={"filename": "a.csv"}, content=b"a\n"
        )
        assert done.status_code == 202, done.text
    await w2
    job = await wait_job(client, auth, job_id)
    assert job["status"] == "done", job


async def test_an_upload_of_a_handed_back_run_before_the_rerun_opens_is_the_attempts_result(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    service: FakeReportService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Interleaving:
    1. attempt 1 runs on W1 (nonce n1, its row in remote_attempts); the service answers 202 and works;
    2. W1 shuts down past its grace: attempt 1 is handed back (pending, attempt 0);
    3. W2 starts attempt 1 again (the job is running, attempt 1) and has not opened its run's row yet (it
       resolves the URL and checks its slot first; the gate below holds it there);
    4. the service's first run uploads its file under n1: `state` asks only "is attempt 1 of replay 0
       running?" (yes: W2's), never which run, and the row still carries n1 with no outcome, so the upload is
       stored and answered 202 `{"accepted": true}`;
    5. W2 opens its run: the row with the accepted result was deleted (the file left behind, nobody's), and
       the service called a second time for the same attempt.
    Now the accepted result is the attempt's: W2's run takes it and does not call the service again (a
    later upload of the old run, once W2 opened its own, is refused: see the nonce in `touch`)."""
    name = declare(monkeypatch, service, "async")
    service.script = ["accept", "accept"]
    opening, go_on = asyncio.Event(), asyncio.Event()
    real_hand_over = remote.hand_over
    runs = 0

    async def held_hand_over(job_id: str, replay: int, attempt: int, tenant: str) -> Any:
        nonlocal runs
        runs += 1
        if runs == 2:  # W2's run: held between its start and its row
            opening.set()
            await go_on.wait()
        return await real_hand_over(job_id, replay, attempt, tenant)

    monkeypatch.setattr(remote, "hand_over", held_hand_over)
    job_id = await submit_id(client, auth, name, job={"max_attempts": 1})
    w1 = asyncio.create_task(run_job(job_id, "w1"))
    [first] = await service.calls_made(1)
    await shut_down(w1)

    w2 = asyncio.create_task(drain(timeout_s=30))
    await asyncio.wait_for(opening.wait(), 20)
    assert (await get_job(client, auth, job_id))["status"] == "running"
    stale = await client.post(callback_path(first, "complete"), params={"filename": "old.csv"}, content=b"o")
    assert stale.status_code == 202, stale.text
    go_on.set()
    await w2
    job = await wait_job(client, auth, job_id)
    assert job["status"] == "done" and job["output"]["filename"] == "old.csv", job
    assert len(service.calls) == 1, "the service was called again for a result it had delivered"


async def test_an_upload_accepted_while_the_stuck_scan_declares_its_attempt_lost_is_not_dropped(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    service: FakeReportService,
    monkeypatch: pytest.MonkeyPatch,
    env: Any,
) -> None:
    """Interleaving:
    1. attempt 1 runs on W1; the service answers 202, works, and uploads its file to the complete URL;
    2. `_record` reads the attempt's state (running: a plain, non-locking SELECT) and, before its UPDATE of
       the remote_attempts row, the stuck scan declares attempt 1 lost (W1's heartbeats did not get through:
       it is alive, but silent to MySQL): the job is retrying, attempt 2 on its way;
    3. `_record`'s UPDATE checks only the remote_attempts row (this run, no outcome yet): it lands, and the
       service is answered 202 `{"accepted": true}` ("the job finishes shortly");
    4. nobody takes that outcome: W1's finish is a stale attempt's, and attempt 2 calls the service again
       (which already delivered) and hears nothing: the job is dead with the file we accepted unused.
    An upload answered 202 must be the job's result, or be refused (410) so the service knows to do more."""
    await env.set(HTTP_REPORT_ALLOWED_HOSTS="127.0.0.1", RETRY_DELAYS_S="[0.05]")
    name = declare(monkeypatch, service, "async")
    service.script = ["accept", "accept"]
    checked, go_on = asyncio.Event(), asyncio.Event()
    real_touch = RemoteAttemptRepository.touch

    async def touch_after_a_pause(self: RemoteAttemptRepository, claim: Any, values: dict[str, Any]) -> int:
        if values.get("outcome") == "succeeded":  # the upload's record: its state check is done
            checked.set()
            await go_on.wait()
        return await real_touch(self, claim, values)

    monkeypatch.setattr(RemoteAttemptRepository, "touch", touch_after_a_pause)
    job_id = await submit_id(client, auth, name, job={"max_attempts": 2})
    w1 = asyncio.create_task(run_job(job_id, "w1"))
    [call] = await service.calls_made(1)
    upload = asyncio.create_task(
        client.post(callback_path(call, "complete"), params={"filename": "a.csv"}, content=b"a\n")
    )
    await asyncio.wait_for(checked.wait(), 20)
    await asyncio.sleep(0.05)
    scan = asyncio.create_task(declare_lost(0.01))  # waits for the report being recorded (its row lock)
    await asyncio.sleep(0.3)
    go_on.set()
    answer = await upload
    assert await scan == 1
    await shut_down(w1)  # the silent worker (its late finish, if any, is a stale attempt's)
    await drain(timeout_s=30)  # attempt 2
    job = await wait_job(client, auth, job_id)
    if answer.status_code == 202:
        assert job["status"] == "done" and job["output"]["filename"] == "a.csv", job
    else:
        assert answer.status_code == 410, answer.text


async def test_a_url_param_cannot_climb_out_of_its_path_segment(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    service: FakeReportService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`render_url` percent-encodes a param so that "a `/` or `?` in a value stays inside its segment", but
    `.` and `..` are unreserved and left as they are; httpx then removes dot segments (RFC 3986 5.2.4) when it
    builds the request. A tenant's params value ".." in `/reports/{region}/summary` sends our signed request
    to `/summary` on the team's (allow-listed, internal) service: a path the declaration never named."""
    name = declare(monkeypatch, service, "sync", f"{service.url}/reports/{{region}}/summary")
    job_id = await submit_id(client, auth, name, region="..")
    await drain(timeout_s=30)
    job = await wait_job(client, auth, job_id)
    assert all(call.path.startswith("/reports/") for call in service.calls), service.calls
    assert job["status"] == "dead" and "'.' or '..'" in job["last_error"]["message"], job


def test_an_async_get_call_does_not_carry_its_attempt_token_in_the_url() -> None:
    """With `method = "GET"` the envelope goes in the query string, the `callback` URLs with it: the attempt
    token (a bearer credential: it can upload any file as the job's output, then delivered to its
    destinations) would be in the request line, so in the team's service's and every proxy's access log, and
    in our own trace of the call. An async type must use POST or PUT: refused when declared."""
    with pytest.raises(DeclarationError) as refused:
        http_type("r13.http.get", "http://127.0.0.1:9/reports/{region}", "async", method="GET")
    assert refused.value.field == "method"
