"""The open dead letters' count by tenant, kept by the transitions (a death opens a letter; a replay, a
resolve, an expiry close it): always equal to a recount of the letters, also when the closers race.

Real MariaDB, Redis and in-process burst workers; `demo.flaky` with `permanent=true` dies on its first try.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.core.db import is_lock_conflict, session_scope
from app.dead_letters.repository import DeadLetterRepository
from app.dead_letters.service import archive_and_purge
from tests.utils.dead_letters import kill_permanently, letters, resolve
from tests.utils.keys import make_key
from tests.utils.workers import drain

SEEDS = (1, 2, 3)


async def counted() -> dict[str, int]:
    """What the count table says, tenant by tenant (zero rows left out)."""
    async with session_scope() as session:
        rows = (await session.execute(text("SELECT tenant, letters FROM open_letter_counts"))).all()
    return {str(t): int(n) for t, n in rows if n}


async def recounted() -> dict[str, int]:
    """The open letters themselves, tenant by tenant."""
    query = "SELECT tenant FROM dead_letters WHERE archived_at IS NULL AND replayed_at IS NULL"
    async with session_scope() as session:
        return dict(Counter(str(t) for t in (await session.execute(text(query))).scalars()))


async def until_no_lock_conflict(call: Callable[[], Awaitable[object]]) -> None:
    """Run `call` again after a deadlock (the transaction rolled back whole, as the scheduler's next tick
    would run it again)."""
    while True:
        try:
            await call()
            return
        except DBAPIError as exc:
            if not is_lock_conflict(exc):
                raise


async def expire_letters(job_ids: list[str]) -> None:
    """Move these jobs' letters past their expiry (archive_and_purge archives them on its next call)."""

    async def expire() -> None:
        async with session_scope() as session:
            for job_id in job_ids:
                stmt = text("UPDATE dead_letters SET expire_at = '2000-01-01' WHERE job_id = :j")
                await session.execute(stmt, {"j": job_id})

    await until_no_lock_conflict(expire)


async def test_a_death_counts_a_letter_and_a_replay_a_resolve_and_an_expiry_each_uncount_one(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    other = await make_key("globex")
    mine = await kill_permanently(client, auth, 3)
    theirs = await kill_permanently(client, other, 1)
    assert await counted() == {"acme": 3, "globex": 1}
    async with session_scope() as session:
        repo = DeadLetterRepository(session)
        assert (await repo.open_letters(None), await repo.open_letters("acme")) == (4, 3)

    assert (await client.post(f"/v1/jobs/{mine[0]}/replay", headers=auth)).status_code == 202
    assert await counted() == {"acme": 2, "globex": 1}
    letter = next(x for x in await letters(client, auth) if x["job_id"] == mine[1])
    assert (await resolve(client, auth, letter["id"])).status_code == 200
    assert (await resolve(client, auth, letter["id"])).status_code == 409  # closed once, counted once
    assert await counted() == {"acme": 1, "globex": 1}
    await expire_letters([mine[2], theirs[0]])
    assert (await archive_and_purge())["archived"] == 2
    assert await counted() == {}
    await drain()  # the replayed job runs again (and succeeds: demo.flaky failed its one time)
    assert await counted() == await recounted() == {}


async def one_closer(
    client: httpx.AsyncClient, auth: dict[str, str], rng: random.Random, job_id: str
) -> None:
    """Close (or try to close) this job's letter one way, or make it expire and archive it."""
    way = rng.choice(["replay", "resolve", "expire", "replay"])
    await asyncio.sleep(rng.random() * 0.01)
    if way == "replay":
        await client.post(f"/v1/jobs/{job_id}/replay", headers=auth)
    elif way == "resolve":
        for letter in await letters(client, auth):
            if letter["job_id"] == job_id:
                await resolve(client, auth, letter["id"])
    else:
        await expire_letters([job_id])
        await until_no_lock_conflict(archive_and_purge)


@pytest.mark.parametrize("seed", SEEDS)
async def test_racing_replays_resolves_and_expiries_keep_the_count_equal_to_a_recount(
    client: httpx.AsyncClient, auth: dict[str, str], seed: int
) -> None:
    """Rounds of: every dead job's letter closed by two to three racing closers chosen at random (replays,
    resolves, expiries, the same job twice), then new deaths; after each round the count equals the
    letters. A miscounted race shows as a drift that only grows."""
    rng = random.Random(seed)
    dead = await kill_permanently(client, auth, 6)
    for _ in range(3):
        closers: list[Any] = []
        for job_id in dead:
            closers += [one_closer(client, auth, rng, job_id) for _ in range(rng.randint(2, 3))]
        rng.shuffle(closers)
        await asyncio.gather(*closers)
        await drain()
        assert await counted() == await recounted(), f"seed {seed}"
        dead = [x["job_id"] for x in await letters(client, auth)]
        dead += await kill_permanently(client, auth, 3)
