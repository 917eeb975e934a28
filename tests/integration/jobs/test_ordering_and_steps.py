"""Per-key ordering with several workers, and multi-step reports with auto/manual steps and step replay."""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from datetime import datetime
from typing import Any

import httpx

from app.maintenance import service as maintenance
from tests.utils.jobs import parse_ts, submit
from tests.utils.keys import make_key
from tests.utils.workers import drain, drain_alerts


async def get(client: httpx.AsyncClient, auth: dict[str, str], path: str) -> Any:
    resp = await client.get(path, headers=auth)
    assert resp.status_code == 200, resp.text
    return resp.json()


async def windows(
    client: httpx.AsyncClient, auth: dict[str, str], ids: list[str]
) -> list[tuple[datetime, datetime]]:
    spans = []
    for job_id in ids:
        attempts = [
            a for a in await get(client, auth, f"/v1/jobs/{job_id}/attempts") if a["outcome"] == "succeeded"
        ]
        assert len(attempts) == 1, (job_id, attempts)
        spans.append((parse_ts(attempts[0]["started_at"]), parse_ts(attempts[0]["finished_at"])))
    return spans


def assert_in_order_without_overlap(spans: list[tuple[datetime, datetime]]) -> None:
    for (start_a, end_a), (start_b, _) in itertools.pairwise(spans):
        assert start_a < start_b, "a later job started first"
        assert end_a <= start_b, "two jobs of one key overlapped"


async def submit_interleaved(client: httpx.AsyncClient, auth: dict[str, str]) -> dict[str, list[str]]:
    by_key: dict[str, list[str]] = defaultdict(list)
    for i in range(50):
        key = f"order-{i % 5}"
        job = await submit(client, auth, "demo.sleep", job={"ordering_key": key}, seconds=0.05)
        by_key[key].append(job["id"])
    return by_key


async def test_fifty_jobs_over_five_keys_on_three_workers_run_in_order_per_key_and_in_parallel_across(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    by_key = await submit_interleaved(client, auth)
    waiting = await get(client, auth, f"/v1/jobs/{by_key['order-0'][1]}")
    assert waiting["ordering_key"] == "order-0"
    await drain(workers=3)
    all_spans = []
    for ids in by_key.values():
        spans = await windows(client, auth, ids)
        assert_in_order_without_overlap(spans)
        all_spans += spans
    overlapping = sum(1 for a in all_spans for b in all_spans if a is not b and a[0] < b[1] and b[0] < a[1])
    assert overlapping > 0, "different keys should run in parallel"


async def test_a_waiting_job_shows_what_blocks_it(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    first = await submit(client, auth, "demo.sleep", job={"ordering_key": "k"}, seconds=0.3)
    second = await submit(client, auth, "demo.csv", job={"ordering_key": "k"}, rows=1)
    worker = asyncio.create_task(drain(burst=False))
    try:
        for _ in range(100):
            body = await get(client, auth, f"/v1/jobs/{second['id']}")
            if body["blocked_by"]:
                break
            await asyncio.sleep(0.02)
        assert body["blocked_by"] == first["id"] and body["status"] == "pending"
        done = (await client.get(f"/v1/jobs/{second['id']}", params={"wait": 10}, headers=auth)).json()
        assert done["status"] == "done" and done["blocked_by"] is None
    finally:
        worker.cancel()


async def test_redis_flush_mid_run_keeps_the_order(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    by_key = await submit_interleaved(client, auth)
    workers = asyncio.create_task(drain(workers=3, burst=False, timeout_s=90))
    try:
        await asyncio.sleep(0.4)
        env.redis.flushall()
        for _ in range(300):
            await maintenance.run_tick(use_lease=False)
            statuses = [(await get(client, auth, f"/v1/jobs/{ids[-1]}"))["status"] for ids in by_key.values()]
            if all(s == "done" for s in statuses):
                break
            await asyncio.sleep(0.2)
    finally:
        workers.cancel()
    for ids in by_key.values():
        assert_in_order_without_overlap(await windows(client, auth, ids))


async def test_dead_predecessor_blocks_successors_until_replayed_unless_they_continue(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    dead = await submit(
        client, auth, "demo.flaky", job={"ordering_key": "acct-7"}, fail_times=1, permanent=True
    )
    waits = await submit(client, auth, "demo.csv", job={"ordering_key": "acct-7"}, rows=1)
    goes_on = await submit(
        client, auth, "demo.csv", job={"ordering_key": "acct-7", "on_predecessor_dead": "continue"}, rows=1
    )
    await drain()
    assert (await get(client, auth, f"/v1/jobs/{dead['id']}"))["status"] == "dead"
    blocked = await get(client, auth, f"/v1/jobs/{waits['id']}")
    assert blocked["status"] == "pending" and blocked["blocked_by"] == dead["id"]
    # `continue` skips the dead job but still waits for the earlier, unfinished `waits`.
    assert (await get(client, auth, f"/v1/jobs/{goes_on['id']}"))["status"] == "pending"
    assert (await client.post(f"/v1/jobs/{dead['id']}/replay", headers=auth)).status_code == 202
    await drain()
    for job in (dead, waits, goes_on):
        assert (await get(client, auth, f"/v1/jobs/{job['id']}"))["status"] == "done"


async def test_continue_policy_runs_past_a_dead_predecessor(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    await submit(client, auth, "demo.flaky", job={"ordering_key": "acct-8"}, fail_times=1, permanent=True)
    after = await submit(
        client, auth, "demo.csv", job={"ordering_key": "acct-8", "on_predecessor_dead": "continue"}, rows=1
    )
    await drain()
    assert (await get(client, auth, f"/v1/jobs/{after['id']}"))["status"] == "done"


# ---- steps ---------------------------------------------------------------------------------------


def step_table(steps: list[dict[str, Any]]) -> dict[str, tuple[str, int]]:
    return {s["name"]: (s["status"], s["attempts"]) for s in steps}


async def test_a_step_failing_twice_then_succeeding_does_not_rerun_the_steps_before_it(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job = await submit(client, auth, "demo.steps", fail_step="upload", fail_times=2)
    await drain()
    body = await get(client, auth, f"/v1/jobs/{job['id']}")
    assert body["status"] == "done" and body["attempt"] == 3
    assert body["output"]["filename"] == "steps.txt"
    steps = step_table(await get(client, auth, f"/v1/jobs/{job['id']}/steps"))
    assert steps == {
        "generate": ("succeeded", 1),
        "upload": ("succeeded", 3),
        "notify": ("succeeded", 1),
        "charge": ("succeeded", 1),
    }


async def test_failing_manual_step_dead_letters_the_job_after_one_try_naming_the_step(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job = await submit(client, auth, "demo.steps", fail_step="charge", fail_times=1)
    await drain()
    body = await get(client, auth, f"/v1/jobs/{job['id']}")
    assert body["status"] == "dead" and body["attempt"] == 1
    assert "charge" in body["last_error"]["message"] and body["last_error"]["retryable"] is False
    steps = step_table(await get(client, auth, f"/v1/jobs/{job['id']}/steps"))
    assert steps["charge"] == ("failed", 1) and steps["notify"] == ("succeeded", 1)
    [letter] = (await get(client, auth, "/v1/dead-letters"))["items"]
    assert "charge" in letter["error"]["message"]


async def test_replaying_the_manual_step_alone_completes_the_job_without_rerunning_succeeded_steps(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job = await submit(client, auth, "demo.steps", fail_step="charge", fail_times=1)
    await drain()
    bad = await client.post(f"/v1/jobs/{job['id']}/replay", json={"steps": ["refund"]}, headers=auth)
    assert bad.status_code == 422
    resp = await client.post(f"/v1/jobs/{job['id']}/replay", json={"steps": ["charge"]}, headers=auth)
    assert resp.status_code == 202 and resp.json()["replay_count"] == 1
    await drain()
    body = await get(client, auth, f"/v1/jobs/{job['id']}")
    assert body["status"] == "done" and body["output"]["filename"] == "steps.txt"
    steps = step_table(await get(client, auth, f"/v1/jobs/{job['id']}/steps"))
    assert steps == {
        "generate": ("succeeded", 1),
        "upload": ("succeeded", 1),
        "notify": ("succeeded", 1),
        "charge": ("succeeded", 2),
    }


async def test_a_dead_manual_step_is_not_retried_by_a_worker_retry(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    """Even a retryable failure of a manual step stops the job: it is tried at most once automatically."""
    job = await submit(client, auth, "demo.steps", fail_step="charge", fail_times=5)
    await drain()
    steps = step_table(await get(client, auth, f"/v1/jobs/{job['id']}/steps"))
    assert steps["charge"] == ("failed", 1)
    assert (await get(client, auth, f"/v1/jobs/{job['id']}"))["status"] == "dead"


async def test_the_alert_of_a_dead_predecessor_says_its_successors_wait(
    client: httpx.AsyncClient, auth: dict[str, str], dingtalk: Any
) -> None:
    dead = await submit(
        client, auth, "demo.flaky", job={"ordering_key": "acct-9"}, fail_times=1, permanent=True
    )
    for _ in range(2):
        await submit(client, auth, "demo.csv", job={"ordering_key": "acct-9"}, rows=1)
    await drain()
    await drain_alerts()
    [message] = dingtalk.accepted
    assert dead["id"] in message.text
    assert "2 later job(s) with ordering key `acct-9` wait" in message.text


async def test_bulk_replay_of_a_dead_multi_step_job_reruns_its_failed_manual_step(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job = await submit(client, auth, "demo.steps", fail_step="charge", fail_times=1)
    await drain()
    admin = await make_key("ops", "admin")
    resp = await client.post("/v1/dead-letters/replay", json={"job_ids": [job["id"]]}, headers=admin)
    assert resp.json() == {"replayed": 1}
    await drain()
    assert (await get(client, auth, f"/v1/jobs/{job['id']}"))["status"] == "done"
