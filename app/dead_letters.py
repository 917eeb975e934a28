"""Dead letters: alert dispatch (rate-limited, digesting bursts, retried with backoff), replay, archive.

Alerts are driven from MySQL: a letter stays `pending` until a sink accepted a message naming its job,
so a flushed Redis or a dead consumer delays an alert but never loses it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from app import queue
from app.alerts import AlertDeliveryError, AlertSink, build_sinks
from app.alerts.render import render_digest, render_one
from app.config import get_settings
from app.db import session_scope
from app.errors import Conflict, NotFound
from app.models import DeadLetter, ReportJob, utcnow
from app.repository import LetterFilter, Repository
from app.states import REPLAYABLE

log = logging.getLogger(__name__)

DISPATCH_BATCH = 1000


@dataclass(frozen=True)
class AlertOutcome:
    detail: str
    retry_in_s: float | None = None


def _new_id() -> str:
    from ulid import ULID

    return str(ULID())


def alert_backoff_s(attempts: int, max_s: float) -> float:
    """1, 2, 4, 8 … seconds, capped."""
    return float(min(max_s, 2 ** max(0, attempts - 1)))


async def dispatch_alerts(sinks: Sequence[AlertSink] | None = None) -> AlertOutcome:
    """Send every due pending alert within the per-minute budget; one dispatcher at a time."""
    settings = get_settings()
    lock = await queue.try_lock("alerts-dispatch", ttl_s=settings.alert_timeout_s * 4 + 30)
    if lock is None:
        return AlertOutcome("another dispatcher is sending", retry_in_s=1.0)
    try:
        return await _dispatch(list(sinks) if sinks is not None else build_sinks(settings))
    finally:
        with contextlib.suppress(Exception):
            await lock.release()


async def _dispatch(sinks: list[AlertSink]) -> AlertOutcome:
    settings = get_settings()
    now = utcnow()
    async with session_scope() as session:
        repo = Repository(session)
        letters = await repo.pending_alerts(now, DISPATCH_BATCH)
        window_s = settings.alert_rate_window_s
        sent_in_window, oldest = await repo.alert_messages_since(now - timedelta(seconds=window_s))
    if not letters:
        return AlertOutcome("nothing pending")
    # Let a burst gather for ALERT_COALESCE_S so it goes out as one digest instead of many messages.
    waited_s = (now - letters[0].created_at).total_seconds()
    if waited_s < settings.alert_coalesce_s:
        return AlertOutcome("coalescing", retry_in_s=settings.alert_coalesce_s - waited_s + 0.01)
    room = settings.alert_max_per_minute - sent_in_window
    if room <= 0:
        return AlertOutcome("rate limited", retry_in_s=_window_frees_in_s(oldest, now, window_s))
    base_url = settings.public_base_url.rstrip("/")
    messages = [render_one(letters[0], base_url)] if len(letters) == 1 else render_digest(letters, base_url)
    by_job: dict[str, list[DeadLetter]] = {}
    for letter in letters:
        by_job.setdefault(letter.job_id, []).append(letter)
    sent = 0
    for message in messages[:room]:
        ids = [letter.id for job_id in message.job_ids for letter in by_job.get(job_id, [])]
        try:
            for sink in sinks:
                await sink.send(message)
        except AlertDeliveryError as exc:
            attempts = (
                max(letter.alert_attempts for job_id in message.job_ids for letter in by_job[job_id]) + 1
            )
            backoff_s = alert_backoff_s(attempts, settings.alert_retry_max_s)
            async with session_scope() as session:
                await Repository(session).mark_alert_failed(
                    ids, utcnow() + timedelta(seconds=backoff_s), str(exc)
                )
            log.warning(
                "alert delivery failed; will retry",
                extra={"error": str(exc), "retry_in_s": backoff_s, "jobs": len(ids)},
            )
            return AlertOutcome(f"delivery failed: {exc}", retry_in_s=backoff_s)
        async with session_scope() as session:
            await Repository(session).mark_alerted(ids, _new_id(), utcnow())
        sent += 1
    if len(messages) > room:
        return AlertOutcome(f"sent {sent}; rate limited", retry_in_s=window_s / max(1, room))
    return AlertOutcome(f"sent {sent} message(s) naming {len(letters)} dead letter(s)")


def _window_frees_in_s(oldest: datetime | None, now: datetime, window_s: float) -> float:
    if oldest is None:
        return 1.0
    return max(0.1, (oldest + timedelta(seconds=window_s) - now).total_seconds() + 0.05)


# ---- listing, replay, archive ---------------------------------------------------------------------


async def list_letters(flt: LetterFilter, before_id: str | None, limit: int) -> list[DeadLetter]:
    async with session_scope() as session:
        return await Repository(session).list_dead_letters(flt, before_id, limit)


async def replay_job(job_id: str, tenant: str | None) -> ReportJob:
    """dead/cancelled → pending (attempt reset, replay_count + 1), letters marked replayed, re-enqueued."""
    now = utcnow()
    async with session_scope() as session:
        repo = Repository(session)
        job = await repo.get_job(job_id, tenant)
        if job is None:
            raise NotFound(f"No job {job_id!r}.")
        if job.status not in REPLAYABLE:
            raise Conflict(
                f"Job {job_id} is {job.status.value}; only dead or cancelled jobs can be replayed."
            )
        if await repo.cas_replay(job, now) != 1:
            raise Conflict(f"Job {job_id} changed while replaying; try again.")
        await repo.mark_letters_replayed(job_id, now)
    async with session_scope() as session:
        replayed = await Repository(session).get_job(job_id)
    assert replayed is not None
    await queue.enqueue_run(replayed.id, replayed.replay_count)
    return replayed


async def replay_letters(
    job_ids: Sequence[str] = (), report_type: str | None = None, since: datetime | None = None
) -> int:
    """Bulk replay (admin): by job ids, or by report type and/or time; counts the jobs replayed."""
    flt = LetterFilter(
        tenant=None,
        include_archived=True,
        report_type=report_type,
        created_after=since,
        job_ids=job_ids,
        unreplayed_only=True,
    )
    replayed = 0
    before_id: str | None = None
    seen: set[str] = set()
    while True:
        letters = await list_letters(flt, before_id, 500)
        if not letters:
            return replayed
        for letter in letters:
            if letter.job_id in seen:
                continue
            seen.add(letter.job_id)
            try:
                await replay_job(letter.job_id, None)
                replayed += 1
            except (Conflict, NotFound):
                continue
        before_id = letters[-1].id


async def archive_and_purge() -> dict[str, int]:
    settings = get_settings()
    now = utcnow()
    async with session_scope() as session:
        repo = Repository(session)
        archived = await repo.archive_expired_letters(now)
        purged = await repo.purge_archived_letters(now - timedelta(seconds=settings.dead_letter_retention_s))
    return {"archived": archived, "purged": purged}


async def republish_pending(grace_s: float = 2.0) -> int:
    """Re-publish alerts still pending (lost message, flushed Redis, consumer down); dedup by arq job id."""
    now = utcnow()
    async with session_scope() as session:
        ids = await Repository(session).letters_to_republish(now, now - timedelta(seconds=grace_s), 500)
    published = 0
    for letter_id in ids:
        if await queue.enqueue_dead_letter(letter_id):
            published += 1
    return published
