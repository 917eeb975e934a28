"""Completion callbacks: the outbox row of a terminal job, its signed delivery, re-publishing what is due.

A delivery row is written with the job's terminal transition; it is POSTed until a 2xx answer or
CALLBACK_MAX_ATTEMPTS tries (CALLBACK_RETRY_DELAYS_S apart), and never changes the job's own status.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from app.callbacks.repository import CallbackRepository
from app.callbacks.ssrf import CallbackRefused, check_url
from app.core import metrics, queue, tracing
from app.core.config import Settings, get_settings
from app.core.db import session_scope
from app.core.ids import new_id
from app.core.signing import EVENT_HEADER, SIGNATURE_HEADER, sign
from app.core.states import CallbackStatus
from app.core.times import utcnow
from app.models import CallbackDelivery

log = logging.getLogger(__name__)

DELIVERY_HEADER = "X-Report-Delivery"
DEV_SECRET = "dev-insecure-callback-secret"


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
    attempts = row.attempts + 1
    async with session_scope() as session:
        repo = CallbackRepository(session)
        if error is None:
            await repo.record_try(row, CallbackStatus.DELIVERED, attempts, None, None, utcnow())
            metrics.count_callback("delivered")
            return DeliveryOutcome("delivered")
        if attempts >= settings.callback_max_attempts:
            await repo.record_try(row, CallbackStatus.FAILED, attempts, error, None, None)
            metrics.count_callback("given_up")
            log.warning(
                "callback given up", extra={"job_id": row.job_id, "attempts": attempts, "error": error}
            )
            return DeliveryOutcome(f"failed after {attempts} tries: {error}")
        delay_s = settings.callback_backoff.delay_s(attempts)
        next_at = utcnow() + timedelta(seconds=delay_s)
        await repo.record_try(row, CallbackStatus.PENDING, attempts, error, next_at, None)
    metrics.count_callback("error")
    return DeliveryOutcome(f"attempt {attempts} failed: {error}", retry_in_s=delay_s)


async def _post(row: CallbackDelivery, settings: Settings) -> str | None:
    """One delivery attempt; None on a 2xx answer, else what went wrong."""
    secret = secret_for(row.tenant, settings)
    if secret is None:
        return "no callback secret configured (CALLBACK_SECRET)"
    try:
        await check_url(row.url, settings)  # again at delivery time: DNS may have changed since submit
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
        async with httpx.AsyncClient(timeout=settings.callback_timeout_s, follow_redirects=False) as client:
            resp = await client.post(row.url, content=body, headers=headers)
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
