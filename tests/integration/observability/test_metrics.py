"""/metrics on the API: every counter, histogram and gauge has exactly the value a scripted workload implies,
read back by parsing the exposition text (workers run in-process here; tests/e2e does it across processes)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.utils.jobs import submit, submit_id
from tests.utils.metrics import label_sets, promtool_check, value
from tests.utils.workers import drain, drain_alerts


async def scrape(client: httpx.AsyncClient) -> str:
    from app.observability.service import forget_snapshot

    forget_snapshot()
    resp = await client.get("/metrics")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    return resp.text


async def test_a_scripted_workload_counts_exactly(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any, dingtalk: Any, env: Any
) -> None:
    other = await _other_tenant_key()
    done = [await submit_id(client, auth, "demo.csv", rows=1) for _ in range(3)]
    done.append(await submit_id(client, other, "demo.csv", job={"callback_url": receiver.url}, rows=1))
    retried = [await submit_id(client, auth, "demo.flaky", fail_times=1) for _ in range(2)]
    dead = [await submit_id(client, auth, "demo.flaky", fail_times=1, permanent=True) for _ in range(2)]
    cancelled = await submit_id(client, auth, "demo.csv", rows=1)
    assert (await client.post(f"/v1/jobs/{cancelled}/cancel", headers=auth)).status_code == 202

    text = await scrape(client)
    assert value(text, "reports_jobs_submitted_total") == 9
    assert value(text, "reports_jobs_submitted_total", tenant="other", report_type="demo.csv") == 1
    assert value(text, "reports_jobs_submitted_total", tenant="acme", report_type="demo.flaky") == 4
    assert value(text, "reports_jobs", status="pending") == 8
    assert value(text, "reports_jobs_finished_total", status="cancelled") == 1
    assert value(text, "reports_oldest_eligible_job_age_seconds") > 0

    await drain()
    await drain_alerts()
    text = await scrape(client)
    assert value(text, "reports_attempts_finished_total", outcome="succeeded") == 6
    assert value(text, "reports_attempts_finished_total", outcome="failed") == 4
    assert value(text, "reports_retries_scheduled_total") == 2
    assert value(text, "reports_jobs_finished_total", status="done") == 6
    assert value(text, "reports_jobs_finished_total", status="dead") == 2
    assert value(text, "reports_jobs_finished_total", status="dead", report_type="demo.flaky") == 2
    assert value(text, "reports_queue_wait_seconds_count") == 10
    assert value(text, "reports_attempt_duration_seconds_count") == 10
    assert value(text, "reports_job_duration_seconds_count", status="done") == 6
    assert value(text, "reports_job_duration_seconds_count") == 9  # 6 done, 2 dead, 1 cancelled
    assert value(text, "reports_alert_deliveries_total", sink="dingtalk", result="sent") == 2
    assert value(text, "reports_callback_deliveries_total", result="delivered") == 1
    # The state, from MySQL: nothing live, two open letters, nothing pending.
    assert value(text, "reports_jobs") == 0
    assert value(text, "reports_oldest_eligible_job_age_seconds") == 0
    assert value(text, "reports_dead_letters_open") == 2
    assert value(text, "reports_alert_deliveries_pending") == 0
    assert value(text, "reports_callbacks_pending") == 0
    assert value(text, "reports_state_up") == 1
    assert value(text, "reports_queue_length", queue="main") == 0

    assert (await client.post(f"/v1/jobs/{dead[0]}/replay", headers=auth)).status_code == 202
    text = await scrape(client)
    assert value(text, "reports_replays_total", report_type="demo.flaky") == 1
    assert value(text, "reports_dead_letters_open") == 1
    assert value(text, "reports_jobs", status="pending", report_type="demo.flaky") == 1
    assert retried and done
    check = promtool_check(text)
    assert check.returncode == 0, check.stdout + check.stderr


async def test_tenant_label_can_be_dropped(client: httpx.AsyncClient, auth: dict[str, str], env: Any) -> None:
    await env.set(METRICS_TENANT_LABEL="false")
    await submit(client, auth, "demo.csv", rows=1)
    text = await scrape(client)
    assert label_sets(text, "reports_jobs_submitted_total") == [{"report_type": "demo.csv"}]
    assert label_sets(text, "reports_jobs") == [{"status": "pending", "report_type": "demo.csv"}]


async def test_gauges_say_the_state_is_unknown_when_mysql_is_down(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(DATABASE_URL="mysql+asyncmy://nobody:x@127.0.0.1:1/none")
    text = await scrape(client)
    assert value(text, "reports_state_up") == 0
    assert label_sets(text, "reports_jobs") == []  # no made-up zeros
    assert promtool_check(text).returncode == 0


async def test_the_oldest_eligible_job_skips_future_and_blocked_jobs(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    await submit(client, auth, "demo.csv", job={"run_at": _in_one_hour()}, rows=1)
    text = await scrape(client)
    assert value(text, "reports_jobs", status="scheduled") == 1
    assert value(text, "reports_oldest_eligible_job_age_seconds") == 0


async def _other_tenant_key() -> dict[str, str]:
    from tests.utils.keys import make_key

    return await make_key("other")


def _in_one_hour() -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) + timedelta(hours=1)).isoformat()
