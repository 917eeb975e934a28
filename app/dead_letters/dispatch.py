"""Alert dispatch of dead letters: rate-limited per sink, bursts digested, failures retried with backoff.

Alerts are driven from MySQL: each configured sink (DingTalk, Feishu, webhook, or the log) has one
`alert_deliveries` row per pending letter with its own retries, backoff and per-window budget. A letter
stays `pending` until every configured sink accepted a message naming its job: a failing sink, a flushed
Redis or a dead consumer delays an alert but never loses it, and a sink that accepted is not sent it again.
A send is recorded after the sink accepted it (never lose an alert), riding out a database outage of up
to RECORD_SENT_FOR_S; after a longer one the alert is sent again once MySQL is back (at least once).
One dispatcher sends at a time: it holds a lease renewed before each send and stops once it is not its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from redis.asyncio.lock import Lock
from redis.exceptions import LockNotOwnedError
from sqlalchemy.exc import IntegrityError

from app.core import metrics, redis_pool, tracing
from app.core.config import Settings, get_settings
from app.core.db import is_db_outage, outage_retrying, session_scope
from app.core.ids import new_id
from app.core.states import AlertStatus
from app.core.times import utcnow
from app.dead_letters.alert_repository import AlertRepository
from app.dead_letters.repository import DeadLetterRepository
from app.dead_letters.sinks import AlertDeliveryError, AlertMessage, AlertSink, LogSink, build_sinks
from app.dead_letters.sinks.render import render_digest, render_one
from app.models import AlertDelivery, DeadLetter

log = logging.getLogger(__name__)

DISPATCH_BATCH = 1000
# How long recording what a sink answered rides out a database outage. Within the dispatch lease, so no other
# consumer sends a pending alert while its acceptance waits to be written.
RECORD_SENT_FOR_S = 30.0
# A sink's HTTP timeout applies to each of connect, write, read and pool wait, not to the whole call: one send
# is cut off at this many of them, so that the lease below covers it.
SEND_TIMEOUTS = 4
# Past one send and RECORD_SENT_FOR_S: the record's last try (connect and pool timeouts), a slow Redis.
LEASE_MARGIN_S = 30.0
LEASE_LOST_RETRY_S = 1.0


@dataclass(frozen=True)
class AlertOutcome:
    detail: str
    retry_in_s: float | None = None


@dataclass
class _SinkOutcome:
    detail: str
    retry_in_s: float | None = None
    touched: list[str] = field(default_factory=list)  # letter ids whose delivery changed


def sink_keys(sinks: Sequence[AlertSink]) -> list[str]:
    """Each sink's key in `alert_deliveries.sink`: its name, made unique if two sinks share one."""
    keys: list[str] = []
    for sink in sinks:
        key, n = sink.name, 1
        while key in keys:
            n += 1
            key = f"{sink.name}-{n}"
        keys.append(key)
    return keys


def send_bound_s(settings: Settings) -> float:
    """The longest one send may take before it counts as failed."""
    return settings.alert_timeout_s * SEND_TIMEOUTS


def lease_s(settings: Settings) -> float:
    """The dispatch lease's length from each renewal: one send and its record, not a whole dispatch (up to
    ALERT_MAX_PER_MINUTE sends per sink), which it would have to outlast with no bound."""
    return send_bound_s(settings) + RECORD_SENT_FOR_S + LEASE_MARGIN_S


@dataclass(frozen=True)
class _Lease:
    """The dispatch lock, renewed to its full length before each send. A renewal that finds it gone or
    another's (it expired, Redis was flushed) means another dispatcher may be sending the same alerts."""

    lock: Lock

    async def renew(self) -> bool:
        try:
            return bool(await self.lock.reacquire())
        except LockNotOwnedError:
            return False


async def dispatch_alerts(sinks: Sequence[AlertSink] | None = None) -> AlertOutcome:
    """Send every due pending alert to every sink within its budget; one dispatcher at a time."""
    settings = get_settings()
    lock = await redis_pool.try_lock("alerts-dispatch", ttl_s=lease_s(settings))
    if lock is None:
        return AlertOutcome("another dispatcher is sending", retry_in_s=1.0)
    try:
        chosen = list(sinks) if sinks is not None else build_sinks(settings)
        return await _dispatch(chosen or [LogSink()], _Lease(lock))
    finally:
        # A lock that is no longer ours is left to its holder (redis-py checks the token).
        with contextlib.suppress(Exception):
            await lock.release()


async def _dispatch(sinks: list[AlertSink], lease: _Lease) -> AlertOutcome:
    settings = get_settings()
    keys = sink_keys(sinks)
    await _prepare(keys)
    now = utcnow()
    results = await asyncio.gather(
        *(_dispatch_sink(key, sink, now, settings, lease) for key, sink in zip(keys, sinks, strict=True)),
        return_exceptions=True,
    )
    touched = sorted({i for r in results if isinstance(r, _SinkOutcome) for i in r.touched})
    if touched:
        await _settle(keys, touched)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    outcomes = [r for r in results if isinstance(r, _SinkOutcome)]
    retries = [o.retry_in_s for o in outcomes if o.retry_in_s is not None]
    if all(o.detail == "nothing due" for o in outcomes):
        return AlertOutcome("nothing pending")
    detail = "; ".join(f"{key}: {o.detail}" for key, o in zip(keys, outcomes, strict=True))
    return AlertOutcome(detail, retry_in_s=min(retries) if retries else None)


async def _prepare(keys: list[str]) -> None:
    """Give every pending letter a delivery row per configured sink, and settle letters all sinks accepted
    (a dispatcher that stopped mid-way, or a sink removed from the configuration)."""
    now = utcnow()
    for key in keys:
        try:
            async with session_scope() as session:
                repo = AlertRepository(session)
                missing = await repo.letters_missing_delivery(key, DISPATCH_BATCH)
                await repo.add_deliveries(key, missing, now)
        except IntegrityError:
            log.warning("alert deliveries created concurrently; continuing", extra={"sink": key})
    async with session_scope() as session:
        done = await AlertRepository(session).letters_alerted_by_all(keys, None, DISPATCH_BATCH)
    if done:
        await _settle(keys, done)


async def _dispatch_sink(
    key: str, sink: AlertSink, now: datetime, settings: Settings, lease: _Lease
) -> _SinkOutcome:
    """Digest and budget rules for one sink; a failure backs off this sink only. Each send goes out only
    under a freshly renewed lease: once it is lost, what is left is the new holder's to send."""
    window_s = settings.alert_rate_window_s
    async with session_scope() as session:
        repo = AlertRepository(session)
        due = await repo.due_deliveries(key, now, DISPATCH_BATCH)
        sent_in_window, oldest = await repo.messages_since(key, now - timedelta(seconds=window_s))
    if not due:
        return _SinkOutcome("nothing due")
    letters = [letter for _, letter in due]
    attempts = {letter.id: delivery.attempts for delivery, letter in due}
    # Let a burst gather for ALERT_COALESCE_S so it goes out as one digest instead of many messages.
    waited_s = (now - letters[0].created_at).total_seconds()
    if waited_s < settings.alert_coalesce_s:
        return _SinkOutcome("coalescing", retry_in_s=settings.alert_coalesce_s - waited_s + 0.01)
    room = settings.alert_max_per_minute - sent_in_window
    if room <= 0:
        return _SinkOutcome("rate limited", retry_in_s=_window_frees_in_s(oldest, now, window_s))
    base_url = settings.public_base_url.rstrip("/")
    async with session_scope() as session:
        waiting = await DeadLetterRepository(session).waiting_successors(
            {letter.job_id for letter in letters}
        )
        traceparents = (
            await DeadLetterRepository(session).job_traceparents([letter.job_id for letter in letters])
            if tracing.enabled()
            else {}
        )
    if len(letters) == 1:
        messages = [render_one(letters[0], base_url, waiting)]
    else:
        messages = render_digest(letters, base_url, waiting)
    by_job: dict[str, list[DeadLetter]] = {}
    for letter in letters:
        by_job.setdefault(letter.job_id, []).append(letter)
    sent = 0
    touched: list[str] = []
    for message in messages[:room]:
        ids = [letter.id for job_id in message.job_ids for letter in by_job.get(job_id, [])]
        if not await lease.renew():
            log.warning("alert dispatch lease lost; leaving the rest to its holder", extra={"sink": key})
            return _SinkOutcome(f"sent {sent}; lease lost to another dispatcher", LEASE_LOST_RETRY_S, touched)
        try:
            with _alert_span(key, message.job_ids, traceparents):
                await _send_within(sink, message, send_bound_s(settings))
        except Exception as exc:  # AlertDeliveryError, or a broken sink: either way only this sink waits
            error = str(exc) or type(exc).__name__
            backoff_s = settings.alert_backoff.delay_s(max(attempts[i] for i in ids) + 1)
            next_at = utcnow() + timedelta(seconds=backoff_s)
            async for attempt in outage_retrying(RECORD_SENT_FOR_S):
                with attempt:
                    async with session_scope() as session:
                        await AlertRepository(session).mark_failed(key, ids, next_at, error)
            log.warning(
                "alert delivery failed; will retry",
                extra={"sink": key, "error": error, "retry_in_s": backoff_s, "jobs": len(ids)},
            )
            metrics.count_alert(key, "error", len(ids))
            touched += ids
            return _SinkOutcome(f"sent {sent}; delivery failed: {error}", backoff_s, touched)
        await _record_sent(key, ids, message.job_ids)
        metrics.count_alert(key, "sent", len(ids))
        touched += ids
        sent += 1
    if len(messages) > room:
        return _SinkOutcome(f"sent {sent}; rate limited", window_s / max(1, room), touched)
    return _SinkOutcome(f"sent {sent} message(s) naming {len(letters)} dead letter(s)", None, touched)


async def _send_within(sink: AlertSink, message: AlertMessage, bound_s: float) -> None:
    """`sink.send`, failed if it takes over `bound_s` (a peer trickling its answer, a stuck custom sink)."""
    bound = asyncio.timeout(bound_s)
    try:
        async with bound:
            await sink.send(message)
    except TimeoutError as exc:
        if not bound.expired():
            raise  # the sink's own timeout, not ours
        raise AlertDeliveryError(f"no answer within {bound_s:g} s") from exc


async def _record_sent(key: str, letter_ids: list[str], job_ids: Sequence[str]) -> None:
    """Record that `key` accepted the message naming `letter_ids`, riding out a short database outage: an
    unrecorded acceptance is sent again. Safe to repeat: only pending deliveries are marked."""
    message_id, sent_at = new_id(), utcnow()
    try:
        async for attempt in outage_retrying(RECORD_SENT_FOR_S):
            with attempt:
                async with session_scope() as session:
                    await AlertRepository(session).mark_sent(key, letter_ids, message_id, sent_at)
    except Exception as exc:
        if is_db_outage(exc):
            log.error(
                "alert accepted by the sink but not recorded: MySQL unreachable for over %g s; "
                "it will be sent again once MySQL is back",
                RECORD_SENT_FOR_S,
                extra={"sink": key, "jobs": list(job_ids), "error": type(exc).__name__},
            )
        raise


def _alert_span(
    sink: str, job_ids: Sequence[str], traceparents: Mapping[str, str]
) -> AbstractContextManager[Any]:
    """The `dead_letter.alert` span of one message: in the dead job's own trace when the message names one
    job; a digest's span starts a trace of its own, linked to each of its jobs' traces."""
    one = len(job_ids) == 1
    return tracing.span(
        "dead_letter.alert",
        parent=traceparents.get(job_ids[0]) if one else None,
        links=() if one else [traceparents.get(job_id) for job_id in job_ids],
        attributes={"alert.sink": sink, "alert.jobs": len(job_ids), "job.id": job_ids[0] if one else None},
    )


async def _settle(keys: list[str], letter_ids: list[str]) -> None:
    """Mirror the deliveries onto the letters: `sent` (with the last acceptance's time and message) once
    every configured sink accepted; otherwise attempts, the earliest next try and the last errors. Rides out
    a short outage; if it does not, the next dispatch's `_prepare` settles what every sink accepted."""
    async for attempt in outage_retrying(RECORD_SENT_FOR_S):
        with attempt:
            await _settle_once(keys, letter_ids)


async def _settle_once(keys: list[str], letter_ids: list[str]) -> None:
    async with session_scope() as session:
        repo = AlertRepository(session)
        by_letter: dict[str, list[AlertDelivery]] = {}
        for delivery in await repo.deliveries_of(letter_ids, keys):
            by_letter.setdefault(delivery.letter_id, []).append(delivery)
        groups: dict[tuple[tuple[str, Any], ...], list[str]] = {}
        for letter_id, deliveries in by_letter.items():
            values = _letter_alert_values(deliveries, len(set(keys)))
            groups.setdefault(tuple(sorted(values.items())), []).append(letter_id)
        for values_key, ids in groups.items():
            await repo.update_pending_letters(ids, dict(values_key))


def _letter_alert_values(deliveries: list[AlertDelivery], n_sinks: int) -> dict[str, Any]:
    attempts = max(d.attempts for d in deliveries)
    pending = [d for d in deliveries if d.status != AlertStatus.SENT]
    if not pending and len(deliveries) == n_sinks:
        last = max(deliveries, key=lambda d: (d.sent_at or d.created_at, d.message_id or ""))
        return {
            "alert_status": AlertStatus.SENT.value,
            "alert_sent_at": last.sent_at,
            "alert_message_id": last.message_id,
            "alert_attempts": attempts,
            "alert_next_at": None,
            "alert_last_error": None,
        }
    next_times = [d.next_attempt_at for d in pending]
    errors = [f"{d.sink}: {d.last_error}" for d in pending if d.last_error]
    return {
        "alert_attempts": attempts,
        "alert_next_at": None if None in next_times or not next_times else min(t for t in next_times if t),
        "alert_last_error": "; ".join(errors)[:500] or None,
    }


def _window_frees_in_s(oldest: datetime | None, now: datetime, window_s: float) -> float:
    if oldest is None:
        return 1.0
    return max(0.1, (oldest + timedelta(seconds=window_s) - now).total_seconds() + 0.05)
