"""Hostile review of ordering keys (commit order, per-key places): never two jobs of a key running at once."""

from __future__ import annotations

from typing import Any

import httpx

from app.attempts import group_commit, service
from app.core.states import AttemptOutcome
from tests.utils.batches import post_batch
from tests.utils.jobs import cancel, get_job, submit_id


async def test_a_replayed_predecessor_never_runs_beside_its_successor_on_the_same_key(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    """P and S share a key. P is cancelled while pending (a cancelled predecessor never blocks), so S starts.
    While S runs, P is replayed (cancelled jobs may be): its start looks only at jobs placed *before* it on
    the key, finds none, and starts beside S: two jobs of one key running at once."""
    key = {"ordering_key": "user-1:orders"}
    p = await submit_id(client, auth, "demo.sleep", job=key, seconds=1)
    s = await submit_id(client, auth, "demo.sleep", job=key, seconds=1)
    await cancel(client, auth, p)
    assert isinstance(await group_commit.start_attempt(s, "w1"), service.Started)  # S runs

    replay = await client.post(f"/v1/jobs/{p}/replay", headers=auth)
    assert replay.status_code == 202, replay.text
    decision = await group_commit.start_attempt(p, "w2")
    running = [j for j in (p, s) if (await get_job(client, auth, j))["status"] == "running"]
    assert isinstance(decision, service.Blocked) and running == [s], (decision, running)


async def test_a_replayed_resolved_predecessor_waits_for_its_running_successor(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    """The docs' own case (docs/how-to/jobs.md, Ordering keys): a dead predecessor's letter is resolved, so
    its successor may start; the predecessor is replayed ("it then blocks its key again while it runs")
    while the successor runs. The replayed predecessor starts anyway: both run."""
    key = {"ordering_key": "user-2:orders", "max_attempts": 1}
    p = await submit_id(client, auth, "demo.flaky", job=key, fail_times=1, permanent=True)
    s = await submit_id(client, auth, "demo.sleep", job=key, seconds=1)
    started = await service.start_attempt(p, "w0")
    assert isinstance(started, service.Started)
    await service.fail_attempt(started.key, AttemptOutcome.FAILED, service.error_dict("X", "boom", False))
    assert (await get_job(client, auth, p))["status"] == "dead"
    letters = (await client.get("/v1/dead-letters", headers=auth)).json()["items"]
    [letter] = [item for item in letters if item["job_id"] == p]
    resolved = await client.post(
        f"/v1/dead-letters/{letter['id']}/resolve", json={"reason": "fixed by hand"}, headers=auth
    )
    assert resolved.status_code in (200, 202), resolved.text
    assert isinstance(await group_commit.start_attempt(s, "w1"), service.Started)  # S runs

    replay = await client.post(f"/v1/jobs/{p}/replay", headers=auth)
    assert replay.status_code == 202, replay.text
    decision = await group_commit.start_attempt(p, "w2")
    running = [j for j in (p, s) if (await get_job(client, auth, j))["status"] == "running"]
    assert isinstance(decision, service.Blocked) and running == [s], (decision, running)


async def test_jobs_of_one_ordering_key_in_a_batch_run_in_request_order_whatever_their_idempotency_keys(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    """The batch sorts its rows by Idempotency-Key before the INSERT (so concurrent batches lock keys in one
    order), and add_jobs now hands out the ordering places in *that* row order, not in request order: the
    item without an idempotency key, then "a", then "b" -- the reverse of the request."""
    key = "acct-9"
    items = [
        {"report_type": "demo.csv", "params": {"rows": 1}, "ordering_key": key, "idempotency_key": "b"},
        {"report_type": "demo.csv", "params": {"rows": 2}, "ordering_key": key, "idempotency_key": "a"},
        {"report_type": "demo.csv", "params": {"rows": 3}, "ordering_key": key},
    ]
    answer = await post_batch(client, auth, items)
    ids = [result["job"]["id"] for result in answer["results"]]
    decisions = [await group_commit.start_attempt(job_id, "w1") for job_id in ids]
    kinds = [type(decision).__name__ for decision in decisions]
    assert kinds == ["Started", "Blocked", "Blocked"], kinds  # the first in request order goes first
