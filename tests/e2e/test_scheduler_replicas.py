"""Several scheduler replicas against one MySQL and one Redis: no job runs twice, no dead job alerts twice."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import pytest

from tests.utils.fakes.dingtalk import FakeDingTalk
from tests.utils.polling import eventually
from tests.utils.stack import Stack

pytestmark = pytest.mark.timeout(120)

FLAKY = 10
CSV = 20
JOB_ID_RE = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


@pytest.fixture
def dingtalk() -> Iterator[FakeDingTalk]:
    fake = FakeDingTalk().start()
    yield fake
    fake.stop()


async def test_two_scheduler_replicas_cause_no_duplicate_runs_or_alerts(
    stack: Stack, dingtalk: FakeDingTalk
) -> None:
    stack.overrides.update(DINGTALK_WEBHOOK_URL=dingtalk.url, DINGTALK_SECRET=dingtalk.secret)
    stack.start_api()
    stack.start_worker()
    stack.start_dead_letter()
    stack.start_scheduler()
    stack.start_scheduler()

    flaky = {"report_type": "demo.flaky", "params": {"fail_times": 1, "permanent": True}}
    csv = {"report_type": "demo.csv", "params": {"rows": 1}}
    bodies = [flaky if i % 3 == 0 else csv for i in range(FLAKY + CSV)]
    kinds: dict[str, str] = {}
    async with stack.client() as client:
        for i, body in enumerate(bodies):
            if i == len(bodies) // 2:
                # Mid-way: queued work, in-flight messages, leases and alert wake-ups all vanish.
                stack.servers.redis.flushall()
            resp = await client.post("/v1/jobs", json=body)
            assert resp.status_code == 202, resp.text
            kinds[resp.json()["id"]] = body["report_type"]
            await asyncio.sleep(0.05)
    flaky_ids = {j for j, k in kinds.items() if k == "demo.flaky"}
    csv_ids = {j for j, k in kinds.items() if k == "demo.csv"}
    assert (len(flaky_ids), len(csv_ids)) == (FLAKY, CSV)

    def settled() -> bool:
        counts = stack.status_counts()
        sent = stack.scalar("SELECT COUNT(*) FROM dead_letters WHERE alert_status = 'sent'")
        return counts == {"done": CSV, "dead": FLAKY} and int(sent) == FLAKY

    await eventually(settled, 60, "every job terminal and every dead letter alerted")
    # Give replicas a few more scan intervals to (wrongly) re-run or re-alert anything.
    await asyncio.sleep(2.0)
    for proc in stack.procs:
        proc.check_alive()

    rows = stack.sql(
        "SELECT j.id, j.status, j.attempt, "
        "(SELECT COUNT(*) FROM job_attempts a WHERE a.job_id = j.id), "
        "(SELECT GROUP_CONCAT(a.outcome) FROM job_attempts a WHERE a.job_id = j.id), "
        "(SELECT COUNT(*) FROM dead_letters d WHERE d.job_id = j.id) FROM report_jobs j"
    )
    by_id = {row[0]: row[1:] for row in rows}
    assert set(by_id) == flaky_ids | csv_ids
    wrong_csv = {j: by_id[j] for j in csv_ids if by_id[j] != ["done", "1", "1", "succeeded", "0"]}
    assert wrong_csv == {}, wrong_csv
    wrong_flaky = {j: by_id[j] for j in flaky_ids if by_id[j] != ["dead", "1", "1", "failed", "1"]}
    assert wrong_flaky == {}, wrong_flaky

    assert all(r.accepted for r in dingtalk.received), [r.reason for r in dingtalk.received]
    mentions: dict[str, int] = dict.fromkeys(flaky_ids, 0)
    for message in dingtalk.accepted:
        for job_id in set(JOB_ID_RE.findall(message.text)):
            assert job_id in mentions, f"alert names {job_id}, which is not a dead job"
            mentions[job_id] += 1
    assert {j: n for j, n in mentions.items() if n != 1} == {}, [m.text for m in dingtalk.accepted]
