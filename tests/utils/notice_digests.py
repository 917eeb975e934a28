"""Owners' notices as the digest tests stage them (straight into the outbox, as the death, the deadline check
and the fire loop do), and what the database then says of the notices and their digests."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import text

from app.core.db import session_scope
from app.core.ids import new_id
from app.destinations.delivery import Notice, publish, stage_notice
from app.destinations.digest_repository import DigestRepository
from app.destinations.digests import deliver_digest
from app.destinations.repository import DeliveryRepository
from app.models import NoticeDigest

LONG_ERROR = "ValueError: " + "the warehouse refused the query because a partition is offline; " * 4


def a_notice(destination_ids: list[str], n: int, error: str = "boom") -> Notice:
    subject = f"dead:{new_id()}:0"
    return Notice(
        tenant="acme",
        event="dead",
        subject=subject,
        destination_ids=destination_ids,
        title=f"nightly-{n} failed: demo.flaky is dead after 4 attempts",
        lines=[("Schedule", f"nightly-{n}"), ("Job", subject.split(":")[1]), ("Error", error)],
    )


async def stage(notices: list[Notice]) -> list[str]:
    """Stage each notice in its own transaction and publish it once committed (as the death, the deadline
    check and the fire loop do); the outbox rows' ids."""
    ids: list[str] = []
    for notice in notices:
        async with session_scope() as session:
            staged = await stage_notice(session, notice)
        await publish(staged)
        ids += staged
    return ids


async def digest_ids() -> list[str]:
    async with session_scope() as session:
        rows = await session.execute(text("SELECT id FROM notice_digests ORDER BY id"))
        return [str(r[0]) for r in rows]


async def send_when_due(digest_id: str, tries: int = 50) -> str:
    """What the digest's queue message does: try until it is due (or another sender had it)."""
    for _ in range(tries):
        outcome = await deliver_digest(digest_id)
        if outcome.detail != "not due":
            return outcome.detail
        await asyncio.sleep(outcome.retry_in_s or 0.05)
    raise AssertionError(f"digest {digest_id} never came due")


async def rows(ids: list[str]) -> list[Any]:
    async with session_scope() as session:
        repo = DeliveryRepository(session)
        return [await repo.get(i) for i in ids]


async def digest_rows() -> list[NoticeDigest]:
    async with session_scope() as session:
        repo = DigestRepository(session)
        return [row for digest_id in await digest_ids() if (row := await repo.get(digest_id)) is not None]
