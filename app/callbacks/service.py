"""Completion callbacks: the outbox row of a terminal job, its signed delivery, re-publishing what is due.

A delivery row is written with the job's terminal transition; it is POSTed (to the address the SSRF guard
approved) until a 2xx answer or CALLBACK_MAX_ATTEMPTS tries (CALLBACK_RETRY_DELAYS_S apart), and never
changes the job's own status. Each try is recorded after its POST, riding out a database outage of up to
RECORD_TRY_FOR_S; after a longer one a delivered callback is POSTed again (at least once).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from app.callbacks.repository import CallbackRepository
from app.core import metrics, tracing
from app.core.config import Settings, get_settings
from app.core.db import is_db_outage, outage_retrying, session_scope
from app.core.ids import new_id
from app.core.signing import EVENT_HEADER, SIGNATURE_HEADER, sign
from app.core.states import CallbackStatus
from app.core.times import utcnow
from app.dispatch import queue
from app.http.pinned import post_pinned
from app.http.ssrf import CallbackRefused, check_url
from app.models import CallbackDelivery

log = logging.getLogger(__name__)

DELIVERY_HEADER = "X-Report-Delivery"
DEV_SECRET = "dev-insecure-callback-secret"
# How long recording a try rides out a database outage (well within the consumer's 120 s job timeout).
RECORD_TRY_FOR_S = 30.0


def secret_for(tenant: str, settings: Settings) -> str | None:
    if tenant in settings.callback_tenant_secrets:
        return settings.callback_tenant_secrets[tenant].get_secret_value()
    if settings.callback_secret is not None:
        return settings.callback_secret.get_secret_value()
    return None if settings.env.lower() == "production" else DEV_SECRET


async def stage_delivery(
    session: AsyncSession, job_id: str, tenant: str, url: str, status: str, document: dict[str, Any]
) -> str:
    """Write the outbox row of a job that just became terminal, in that transition's own transaction;
    returns the delivery id to publish once it commits."""
    now = utcnow()
    row = CallbackDelivery(
        id=new_id(),
        job_id=job_id,
        tenant=tenant,
        url=url,
        event=f"job.{status}",
        payload=document,
        next_attempt_at=now,
        created_at=now,
    )
    await CallbackRepository(session).add_delivery(row)
    return row.id


async def check_callback_url(tenant: str, url: str) -> str | None:
    """Why `url` can't be a tenant's callback target, or None if it can."""
    settings = get_settings()
    try:
        await check_url(url, settings)
    except CallbackRefused as exc:
        return str(exc)
    if secret_for(tenant, settings) is None:
        return "callbacks need CALLBACK_SECRET (or a tenant secret) to be configured"
    return None


@dataclass(frozen=True)
class DeliveryOutcome:
    detail: str
    retry_in_s: float | None = None


async def deliver(delivery_id: str) -> DeliveryOutcome:
    settings = get_settings()
    now = utcnow()
    async with session_scope() as session:
        repo = CallbackRepository(session)
        row = await repo.get_delivery(delivery_id)
        traceparent = None
        if row is not None and tracing.enabled():
            traceparent = await repo.job_traceparent(row.job_id)
    if row is None or row.status != CallbackStatus.PENDING:
        return DeliveryOutcome("nothing to deliver")
    if row.next_attempt_at > now:
        return DeliveryOutcome("not due", retry_in_s=(row.next_attempt_at - now).total_seconds())
    # In the job's trace; httpx's instrumentation sends the POST's own traceparent to the receiver.
    with tracing.span(
        "callback.deliver",
        parent=traceparent,
        attributes={"job.id": row.job_id, "callback.event": row.event, "callback.attempt": row.attempts + 1},
    ) as span:
        error = await _post(row, settings)
        tracing.annotate(span, {"callback.delivered": error is None}, error=error)
    finished_at = utcnow()
    try:
        async for attempt in outage_retrying(RECORD_TRY_FOR_S):
            with attempt:
                outcome, result = await _record_try(row, error, settings, finished_at)
    except Exception as exc:
        if is_db_outage(exc) and error is None:
            log.error(
                "callback delivered but not recorded: MySQL unreachable for over %g s; "
                "it will be delivered again once MySQL is back",
                RECORD_TRY_FOR_S,
                extra={"job_id": row.job_id, "delivery_id": row.id, "error": type(exc).__name__},
            )
        raise
    metrics.count_callback(result)
    if result == "given_up":
        log.warning(
            "callback given up", extra={"job_id": row.job_id, "attempts": row.attempts + 1, "error": error}
        )
    return outcome


async def _record_try(
    row: CallbackDelivery, error: str | None, settings: Settings, now: datetime
) -> tuple[DeliveryOutcome, str]:
    """Write one try's result (a compare-and-set on the try count, so running it again after a commit whose
    answer was lost changes nothing); returns the outcome and the metric's result label."""
    attempts = row.attempts + 1
    async with session_scope() as session:
        repo = CallbackRepository(session)
        if error is None:
            await repo.record_try(row, CallbackStatus.DELIVERED, attempts, None, None, now)
            return DeliveryOutcome("delivered"), "delivered"
        if attempts >= settings.callback_max_attempts:
            await repo.record_try(row, CallbackStatus.FAILED, attempts, error, None, None)
            return DeliveryOutcome(f"failed after {attempts} tries: {error}"), "given_up"
        delay_s = settings.callback_backoff.delay_s(attempts)
        next_at = now + timedelta(seconds=delay_s)
        await repo.record_try(row, CallbackStatus.PENDING, attempts, error, next_at, None)
    return DeliveryOutcome(f"attempt {attempts} failed: {error}", retry_in_s=delay_s), "error"


async def _post(row: CallbackDelivery, settings: Settings) -> str | None:
    """One delivery attempt; None on a 2xx answer, else what went wrong."""
    secret = secret_for(row.tenant, settings)
    if secret is None:
        return "no callback secret configured (CALLBACK_SECRET)"
    try:
        # Again at delivery time (DNS may have changed since submit); the POST connects to what this approved.
        addresses = await check_url(row.url, settings)
    except CallbackRefused as exc:
        return str(exc)
    body = json.dumps(row.payload, separators=(",", ":"), ensure_ascii=False).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "report-orchestrator-callbacks/1",
        SIGNATURE_HEADER: sign(secret, int(time.time()), body),
        DELIVERY_HEADER: row.id,
        "Idempotency-Key": row.id,
        EVENT_HEADER: row.event,
    }
    try:
        resp = await post_pinned(row.url, addresses, body, headers, settings.callback_timeout_s)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    if 200 <= resp.status_code < 300:
        return None
    return f"HTTP {resp.status_code}"


async def republish_due(limit: int = 500) -> int:
    """Re-publish pending deliveries that are due (lost message, flushed Redis); dedup by arq job id."""
    async with session_scope() as session:
        ids = await CallbackRepository(session).due_delivery_ids(utcnow(), limit)
    published = 0
    for delivery_id in ids:
        if await queue.enqueue_callback(delivery_id):
            published += 1
    return published
