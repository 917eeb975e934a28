"""Use cases of dead letters besides alerting: list, archive and purge, and re-publish pending alerts.

Driven from MySQL: a flushed Redis or a dead consumer delays an alert, never loses it.
"""

from __future__ import annotations

from datetime import timedelta

from app.core.config import get_settings
from app.core.db import session_scope
from app.core.times import utcnow
from app.dead_letters.repository import DeadLetterRepository, LetterFilter
from app.dispatch import queue
from app.models import DeadLetter


async def list_letters(flt: LetterFilter, before_id: str | None, limit: int) -> list[DeadLetter]:
    async with session_scope() as session:
        return await DeadLetterRepository(session).list_letters(flt, before_id, limit)


async def archive_and_purge() -> dict[str, int]:
    settings = get_settings()
    now = utcnow()
    async with session_scope() as session:
        repo = DeadLetterRepository(session)
        archived = await repo.archive_expired(now)
        purged = await repo.purge_archived(now - timedelta(seconds=settings.dead_letter_retention_s))
    return {"archived": archived, "purged": purged}


async def republish_pending(grace_s: float = 2.0) -> int:
    """Re-publish alerts still pending (lost message, flushed Redis, consumer down); dedup by arq job id."""
    now = utcnow()
    async with session_scope() as session:
        ids = await DeadLetterRepository(session).letters_to_republish(
            now, now - timedelta(seconds=grace_s), 500
        )
    published = 0
    for letter_id in ids:
        if await queue.enqueue_dead_letter(letter_id):
            published += 1
    return published
