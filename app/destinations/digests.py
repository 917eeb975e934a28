"""Digests of owners' notices: those staged for one destination within NOTICE_COALESCE_S go out together, in
as few messages as the destination's size limit allows, each notice once, every try the same.

A sender leases the digest, which closes it (a later notice opens the next one): its notices and so its
messages and its webhook `Idempotency-Key` are fixed for every try. Messages already accepted are counted
(`parts_sent`) and not sent again by a retry; a robot's per-minute limit defers the rest without spending a
try; the outcome is recorded on the digest and all its notices in one transaction, by the lease's holder only.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from app.core import redis_pool
from app.core.config import get_settings
from app.core.db import is_db_outage, outage_retrying, session_scope
from app.core.ids import new_id
from app.core.states import DeliveryStatus
from app.core.tenancy import EVERY_TENANT
from app.core.times import utcnow
from app.destinations.delivery import PER_MINUTE, RECORD_FOR_S, DeliveryOutcome, after_try, lease_s
from app.destinations.digest_repository import DigestRepository
from app.destinations.messages import build_sender
from app.destinations.notice_messages import digest_parts
from app.destinations.repository import DestinationRepository
from app.destinations.senders.base import SendError
from app.models import NoticeDigest

log = logging.getLogger(__name__)


async def deliver_digest(digest_id: str) -> DeliveryOutcome:
    """Send a due digest's messages not sent yet, if this sender wins its lease; record the outcome."""
    settings = get_settings()
    now = utcnow()
    async with session_scope() as session:
        row = await DigestRepository(session).get(digest_id)
        if row is None or row.status != DeliveryStatus.PENDING:
            return DeliveryOutcome("nothing to deliver")
        if row.next_attempt_at > now:
            return DeliveryOutcome("not due", retry_in_s=(row.next_attempt_at - now).total_seconds())
        target = await DestinationRepository(session).get(row.destination_id, EVERY_TENANT)
    token = new_id()
    async with session_scope() as session:
        leased = await DigestRepository(session).lease(row, now, now + timedelta(seconds=lease_s()), token)
    if not leased:
        return DeliveryOutcome("another sender has it")
    async with session_scope() as session:
        notices = await DigestRepository(session).notices(row.id)
    if target is None or not notices:
        return await _recorded(row, token, "destination deleted" if notices else "no notices", True, [])
    parts = digest_parts(notices, target.kind, row.id)
    messages = [message for message, _ in parts]
    key = notices[0].id if len(notices) == 1 else row.id  # one notice: its own id, as a report's delivery
    sender = build_sender(target, settings, key, {})
    per_minute = PER_MINUTE.get(target.kind)
    error, final, sent = None, False, row.parts_sent
    for message in messages[row.parts_sent :]:
        if per_minute and (
            wait_s := await redis_pool.take_rate_token(f"destination:{target.id}", per_minute)
        ):
            async with session_scope() as session:
                next_at = utcnow() + timedelta(seconds=wait_s)
                await DigestRepository(session).release(row, token, sent, next_at)
            return DeliveryOutcome(
                f"sent {sent} of {len(messages)}; the robot's minute is full", float(wait_s)
            )
        try:
            await sender.send(message)
        except SendError as exc:
            error = str(exc)
            break
        except ValueError as exc:  # a message the destination can never take (a header it refuses)
            error, final = f"not sendable: {exc}", True
            break
        sent += 1
        if sent < len(messages) and not await _progress(row, token, sent):
            return DeliveryOutcome(f"sent {sent} of {len(messages)}; the lease was lost to another sender")
    accepted = [notice_id for _, ids in parts[:sent] for notice_id in ids]
    return await _recorded(row, token, error, final, accepted)


async def _progress(row: NoticeDigest, token: str, sent: int) -> bool:
    """Count an accepted message and renew the lease for the next one; False once the lease is not ours."""
    until = utcnow() + timedelta(seconds=lease_s())
    async for attempt in outage_retrying(RECORD_FOR_S):
        with attempt:
            async with session_scope() as session:
                return await DigestRepository(session).progress(row, token, sent, until)
    return False  # pragma: no cover (outage_retrying raises once it gives up)


async def _recorded(
    row: NoticeDigest, token: str, error: str | None, final: bool, accepted: list[str]
) -> DeliveryOutcome:
    """The try's outcome; the notices of messages already accepted (`accepted`) are recorded sent whatever
    becomes of the rest."""
    now = utcnow()
    status, next_at, detail = after_try(row.tries + 1, error, final, now)
    sent_at = now if error is None else None
    try:
        async for attempt in outage_retrying(RECORD_FOR_S):
            with attempt:
                async with session_scope() as session:
                    repo = DigestRepository(session)
                    await repo.record_try(row, token, status, error, next_at, sent_at, accepted, now)
    except Exception as exc:
        if is_db_outage(exc) and error is None:
            log.error(
                "notice digest sent but not recorded: MySQL unreachable for over %g s; it may be sent again",
                RECORD_FOR_S,
                extra={"digest_id": row.id},
            )
        raise
    if status == DeliveryStatus.FAILED:
        log.warning("notice digest given up", extra={"digest_id": row.id, "error": error})
    retry_in_s = (next_at - now).total_seconds() if next_at is not None else None
    return DeliveryOutcome(detail, retry_in_s=retry_in_s)
