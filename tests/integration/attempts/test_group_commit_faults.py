"""Group commit when a transaction fails at the worst moment: a batch's starts and successes commit or roll
back together, and one whose commit answered with an error but landed is still answered as its own."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from app.attempts import group_commit, service
from app.core import failpoints
from app.core.db import is_db_outage
from tests.utils.jobs import get_attempts, get_job, submit_id
from tests.utils.workers import drain

WORKER = "host:1"


def failing_once(real: Callable[..., Awaitable[Any]], error: Callable[[], BaseException]) -> Any:
    """`real`, except that its first call raises `error()` (a deadlock, as MariaDB answers one)."""
    calls = [0]

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 1:
            raise error()
        return await real(*args, **kwargs)

    return wrapper


async def plain_and_keyed(client: httpx.AsyncClient, auth: dict[str, str]) -> tuple[str, str]:
    plain = await submit_id(client, auth, "demo.csv", rows=1)
    keyed = await submit_id(client, auth, "demo.csv", job={"ordering_key": "k"}, rows=1)
    return plain, keyed


async def test_a_deadlock_deciding_an_ordered_job_leaves_no_job_started_without_its_caller(
    client: httpx.AsyncClient, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plain, keyed = await plain_and_keyed(client, auth)
    monkeypatch.setattr(
        service, "blocker_of", failing_once(service.blocker_of, lambda: failpoints.deadlock("test"))
    )
    decisions = await asyncio.gather(
        *(group_commit.start_attempt(job_id, WORKER) for job_id in (plain, keyed))
    )
    assert all(isinstance(d, service.Started) for d in decisions), decisions
    for job_id in (plain, keyed):
        assert [a["outcome"] for a in await get_attempts(client, auth, job_id)] == ["running"]


async def test_an_outage_before_a_start_batch_commits_starts_nothing_and_the_next_delivery_starts_it(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    plain, keyed = await plain_and_keyed(client, auth)
    with failpoints.armed(
        "group_start.before_commit", failpoints.raising(lambda: failpoints.FailpointOutage("x"), times=1)
    ):
        answers = await asyncio.gather(
            *(group_commit.start_attempt(job_id, WORKER) for job_id in (plain, keyed)), return_exceptions=True
        )
    outages = [a for a in answers if isinstance(a, BaseException)]
    assert outages and all(is_db_outage(a) for a in outages), answers
    for job_id, answer in zip((plain, keyed), answers, strict=True):
        if isinstance(answer, BaseException):  # its batch rolled back: nothing of it was written
            assert (await get_job(client, auth, job_id))["status"] == "pending"
            assert isinstance(await group_commit.start_attempt(job_id, WORKER), service.Started)
        assert len(await get_attempts(client, auth, job_id)) == 1


async def test_a_start_whose_commit_answer_was_lost_is_answered_as_started(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    plain, keyed = await plain_and_keyed(client, auth)
    with failpoints.armed(
        "group_start.after_commit", failpoints.raising(lambda: failpoints.FailpointOutage("x"), times=1)
    ):
        decisions = await asyncio.gather(
            *(group_commit.start_attempt(job_id, WORKER) for job_id in (plain, keyed))
        )
    assert all(isinstance(d, service.Started) for d in decisions), decisions
    for job_id in (plain, keyed):
        assert [a["outcome"] for a in await get_attempts(client, auth, job_id)] == ["running"]


async def test_a_deadlock_staging_a_success_s_effects_does_not_discard_its_neighbours_success(
    client: httpx.AsyncClient, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plain, keyed = await plain_and_keyed(client, auth)
    started = [await group_commit.start_attempt(job_id, WORKER) for job_id in (plain, keyed)]
    assert all(isinstance(d, service.Started) for d in started), started
    monkeypatch.setattr(
        service,
        "terminal_effects",
        failing_once(service.terminal_effects, lambda: failpoints.deadlock("test")),
    )
    done = await asyncio.gather(*(group_commit.complete_attempt(d.key, None) for d in started))
    assert done == [True, True]
    for job_id in (plain, keyed):
        assert [a["outcome"] for a in await get_attempts(client, auth, job_id)] == ["succeeded"]


async def test_a_success_recorded_again_after_its_commit_landed_is_recognised_as_its_own(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    plain, keyed = await plain_and_keyed(client, auth)
    for job_id in (plain, keyed):
        started = await group_commit.start_attempt(job_id, WORKER)
        assert isinstance(started, service.Started)
        assert await group_commit.complete_attempt(started.key, None)
        # The worker did not hear the commit's answer (the connection dropped) and records it again.
        assert await group_commit.complete_attempt(started.key, None)
        assert [a["outcome"] for a in await get_attempts(client, auth, job_id)] == ["succeeded"]


async def test_an_attempt_handed_back_after_another_worker_dropped_its_message_is_queued_again(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_id = await submit_id(client, auth, "demo.csv", rows=1)
    # A delivery starts the job and is cancelled (worker shutdown) before it hears the answer...
    started = await group_commit.start_attempt(job_id, WORKER)
    assert isinstance(started, service.Started)
    # ...meanwhile another worker takes the message, finds the job running and drops the message as a
    # duplicate...
    await drain()
    assert (await get_job(client, auth, job_id))["status"] == "running"
    # ...then the cancelled delivery hands the attempt back: the job is pending, and must have a message.
    assert await service.release_attempt(started.key)
    await drain()
    assert (await get_job(client, auth, job_id))["status"] == "done"
