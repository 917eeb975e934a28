"""Per-key ordering with real worker processes, one of them SIGKILLed mid-run."""

from __future__ import annotations

import itertools

import pytest

from tests.utils.jobs import get_attempts, parse_ts, wait_job
from tests.utils.polling import eventually
from tests.utils.stack import Stack

pytestmark = pytest.mark.timeout(120)


async def test_sigkilled_worker_mid_run_keeps_the_order_of_each_key(stack: Stack) -> None:
    stack.start_api()
    workers = [stack.start_worker(), stack.start_worker(), stack.start_worker()]
    stack.start_scheduler()
    keys = ["acct-1", "acct-2", "acct-3"]
    async with stack.client() as client:
        by_key: dict[str, list[str]] = {k: [] for k in keys}
        for i in range(24):
            key = keys[i % 3]
            resp = await client.post(
                "/v1/jobs",
                json={"report_type": "demo.sleep", "params": {"seconds": 0.3}, "ordering_key": key},
            )
            assert resp.status_code == 202, resp.text
            by_key[key].append(resp.json()["id"])

        # Kill whichever worker runs the third job of the first key, mid-job.
        target = by_key["acct-1"][2]
        pid = int(await eventually(lambda: stack.job_worker_pid(target), 30, "target running", 0.02))
        victim = stack.proc_by_pid(pid)
        assert victim in workers
        victim.kill()

        for ids in by_key.values():
            for job_id in ids:
                job = await wait_job(client, None, job_id, within_s=60)
                assert job["status"] == "done", job
        history = {
            job_id: await get_attempts(client, None, job_id) for ids in by_key.values() for job_id in ids
        }

    assert [a["outcome"] for a in history[target]] == ["lost", "succeeded"]
    for ids in by_key.values():
        for earlier, later in itertools.pairwise(ids):
            finished = max(parse_ts(a["finished_at"]) for a in history[earlier])
            started = min(parse_ts(a["started_at"]) for a in history[later])
            assert finished <= started, f"{later} started before {earlier} finished"
