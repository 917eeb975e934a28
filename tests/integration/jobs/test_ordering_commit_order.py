"""Ordering keys follow commit order: a job whose request read the clock early, or whose host's clock runs
behind, still waits for a job of its key that committed (and started) before it."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx
import pytest

from app.attempts import group_commit, service
from app.core.times import utcnow
from tests.utils.batches import item, post_batch
from tests.utils.jobs import get_job, submit_id

WORKER = "host:1"


def clock_behind(monkeypatch: pytest.MonkeyPatch, module: str, behind_s: float) -> None:
    """This API host's clock runs `behind_s` late (or its request read the clock that long before it
    committed): every stamp the submit takes is that much earlier."""

    def late() -> datetime:
        return utcnow() - timedelta(seconds=behind_s)

    monkeypatch.setattr(f"{module}.utcnow", late)


async def test_a_keyed_job_stamped_before_a_running_one_committed_after_it_waits_for_it(
    client: httpx.AsyncClient, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await submit_id(client, auth, "demo.csv", job={"ordering_key": "k"}, rows=1)
    assert isinstance(await group_commit.start_attempt(first, WORKER), service.Started)
    clock_behind(monkeypatch, "app.jobs.service", 5.0)
    late = await submit_id(client, auth, "demo.csv", job={"ordering_key": "k"}, rows=1)
    assert (await get_job(client, auth, late))["created_at"] < (await get_job(client, auth, first))[
        "created_at"
    ]
    decision = await group_commit.start_attempt(late, WORKER)
    assert decision == service.Blocked(first), "two jobs of one ordering key would run at once"
    # Alone (a start that falls back from its batch) it is decided the same way.
    assert await service.start_attempt(late, WORKER) == service.Blocked(first)


async def test_a_batch_of_keyed_jobs_stamped_early_waits_for_the_key_s_running_job(
    client: httpx.AsyncClient, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await submit_id(client, auth, "demo.csv", job={"ordering_key": "b"}, rows=1)
    assert isinstance(await group_commit.start_attempt(first, WORKER), service.Started)
    clock_behind(monkeypatch, "app.jobs.batch", 5.0)
    answer = await post_batch(client, auth, [{**item(), "ordering_key": "b"}] * 2)
    later = [result["job"]["id"] for result in answer["results"]]
    assert await group_commit.start_attempt(later[0], WORKER) == service.Blocked(first)
    assert await group_commit.start_attempt(later[1], WORKER) == service.Blocked(later[0])  # the nearest
