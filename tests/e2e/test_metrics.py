"""Metrics across real processes: after a scripted workload with a SIGKILLed worker, each process's
/metrics (the API's, and each worker's, dead-letter consumer's and scheduler's METRICS_PORT) has exactly the
counts the workload implies, and `promtool check metrics` accepts every one of them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from devtools.servers import free_port
from tests.utils.fakes.dingtalk import FakeDingTalk
from tests.utils.fakes.receiver import SECRET, Receiver
from tests.utils.jobs import submit_id, wait_job
from tests.utils.metrics import promtool_check, scrape, value
from tests.utils.polling import eventually
from tests.utils.stack import Stack

pytestmark = pytest.mark.timeout(180)

HEARTBEAT_S = 0.5


@pytest.fixture
def dingtalk() -> Iterator[FakeDingTalk]:
    fake = FakeDingTalk().start()
    yield fake
    fake.stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    fake = Receiver().start()
    yield fake
    fake.stop()


def metrics_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/metrics"


async def test_every_process_counts_a_scripted_workload_exactly(
    stack: Stack, dingtalk: FakeDingTalk, receiver: Receiver
) -> None:
    stack.overrides.update(
        DINGTALK_WEBHOOK_URL=dingtalk.url,
        DINGTALK_SECRET=dingtalk.secret,
        CALLBACK_SECRET=SECRET,
        CALLBACK_ALLOWED_HOSTS="127.0.0.1",
        WORKER_HEARTBEAT_S=str(HEARTBEAT_S),
        METRICS_CACHE_S="0",
    )
    ports = {name: free_port() for name in ("worker-a", "worker-b", "dead-letter", "scheduler")}
    stack.start_api()
    workers = {
        stack.start_worker(METRICS_PORT=ports["worker-a"]).pid: "worker-a",
        stack.start_worker(METRICS_PORT=ports["worker-b"]).pid: "worker-b",
    }
    stack.start_dead_letter(METRICS_PORT=ports["dead-letter"])
    stack.start_scheduler(METRICS_PORT=ports["scheduler"])
    async with stack.client() as client:
        sleeper = await submit_id(client, None, "demo.sleep", seconds=3)
        pid = await eventually(lambda: stack.job_worker_pid(sleeper), 15, "the sleeper running", 0.05)
        victim = stack.proc_by_pid(int(pid))
        assert victim is not None
        victim.kill()
        survivor = ports[next(name for p, name in workers.items() if p != pid)]

        done = [await submit_id(client, None, "demo.csv", rows=1) for _ in range(3)]
        done.append(await submit_id(client, None, "demo.csv", job={"callback_url": receiver.url}, rows=1))
        retried = [await submit_id(client, None, "demo.flaky", fail_times=1) for _ in range(2)]
        dead = [await submit_id(client, None, "demo.flaky", fail_times=1, permanent=True) for _ in range(2)]
        for job_id in [sleeper, *done, *retried, *dead]:
            await wait_job(client, None, job_id, within_s=60)
        await eventually(lambda: len(dingtalk.received) >= 1 and len(receiver.accepted) == 1, 30, "alerts")
        sent = "SELECT COUNT(*) FROM dead_letters WHERE alert_status = 'sent'"
        await eventually(lambda: stack.scalar(sent) == "2", 30, "both letters alerted")
        await asyncio.sleep(2 * HEARTBEAT_S)

    api = scrape(f"{stack.api_url}/metrics")
    worker = scrape(metrics_url(survivor))
    letters = scrape(metrics_url(ports["dead-letter"]))
    scheduler = scrape(metrics_url(ports["scheduler"]))
    for text in (api, worker, letters, scheduler):
        check = promtool_check(text)
        assert check.returncode == 0, check.stdout + check.stderr

    # The API counts what it accepted; the survivor ran every attempt but the killed one.
    assert value(api, "reports_jobs_submitted_total") == 9
    assert value(worker, "reports_attempts_finished_total", outcome="succeeded") == 7
    assert value(worker, "reports_attempts_finished_total", outcome="failed") == 4
    assert value(worker, "reports_retries_scheduled_total") == 2
    assert value(worker, "reports_jobs_finished_total", status="done") == 7
    assert value(worker, "reports_jobs_finished_total", status="dead") == 2
    assert value(worker, "reports_queue_wait_seconds_count") == 11  # 7 successes + 4 failures
    assert value(worker, "reports_attempt_duration_seconds_count") == 11
    assert value(worker, "reports_job_duration_seconds_count") == 9
    # The scheduler's stuck scan rescued the killed worker's attempt.
    assert value(scheduler, "reports_attempts_finished_total", outcome="lost") == 1
    assert value(scheduler, "reports_stuck_jobs_rescued_total", report_type="demo.sleep") == 1
    assert value(scheduler, "reports_retries_scheduled_total") == 1
    # The dead-letter consumer alerted both letters and delivered the one callback.
    assert value(letters, "reports_alert_deliveries_total", sink="dingtalk", result="sent") == 2
    assert value(letters, "reports_callback_deliveries_total", result="delivered") == 1
    # The state, as the API reads it from MySQL and Redis.
    assert value(api, "reports_state_up") == 1
    assert value(api, "reports_jobs") == 0
    assert value(api, "reports_oldest_eligible_job_age_seconds") == 0
    assert value(api, "reports_dead_letters_open") == 2
    assert value(api, "reports_alert_deliveries_pending") == 0
    assert value(api, "reports_callbacks_pending") == 0
    assert value(api, "reports_workers_live", kind="worker") == 1  # the killed one left the list
    assert value(api, "reports_workers_live", kind="dead_letter") == 1
    assert value(api, "reports_workers_live", kind="scheduler") == 1
    assert value(api, "reports_scheduler_last_tick_age_seconds") < 3 * value(
        api, "reports_scheduler_interval_seconds"
    )
    # The killed worker's arq message stays in Redis until arq's own lease on it runs out (harmless: the
    # job is done, so its next delivery is skipped); nothing else waits.
    assert value(api, "reports_queue_length", queue="main") <= 1
    assert value(api, "reports_queue_length", queue="dead_letter") == 0
