"""Completion callbacks: an SSRF guard for callback URLs, HMAC signing, and durable outbox delivery.

A delivery row is written with the job's terminal transition; it is POSTed until a 2xx answer or
CALLBACK_MAX_ATTEMPTS tries (1, 3, 5 … minutes apart), and never changes the job's own status.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import socket
import time
import urllib.parse
from dataclasses import dataclass
from datetime import timedelta

import httpx

from app import queue
from app.config import Settings, get_settings
from app.db import session_scope
from app.models import CallbackDelivery, ReportJob, utcnow
from app.repository import Repository
from app.representation import job_document
from app.states import CallbackStatus

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Report-Signature"
DELIVERY_HEADER = "X-Report-Delivery"
EVENT_HEADER = "X-Report-Event"
DEV_SECRET = "dev-insecure-callback-secret"
METADATA_IPS = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}


class CallbackRefused(ValueError):
    """The callback URL points somewhere we will not send requests to."""


def secret_for(tenant: str, settings: Settings) -> str | None:
    if tenant in settings.callback_tenant_secrets:
        return settings.callback_tenant_secrets[tenant].get_secret_value()
    if settings.callback_secret is not None:
        return settings.callback_secret.get_secret_value()
    return None if settings.env.lower() == "production" else DEV_SECRET


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, as receivers verify it."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def _allowed(
    host: str, addresses: list[ipaddress.IPv4Address | ipaddress.IPv6Address], allow: list[str]
) -> bool:
    for entry in allow:
        if entry.lower() == host.lower():
            return True
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            continue
        if addresses and all(a in network for a in addresses):
            return True
    return False


async def check_url(url: str, settings: Settings) -> None:
    """Refuse non-HTTP(S) URLs and hosts resolving to loopback, private, link-local or metadata addresses."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CallbackRefused("callback_url must be an http(s) URL with a host")
    if parts.username or parts.password:
        raise CallbackRefused("callback_url must not carry credentials")
    host = parts.hostname
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, parts.port or 443, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise CallbackRefused(f"callback host {host!r} does not resolve") from exc
    addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    if _allowed(host, addresses, settings.callback_allowed_hosts):
        return
    for address in addresses:
        if (
            address.is_loopback
            or address.is_private
            or address.is_link_local
            or address.is_reserved
            or address.is_multicast
            or address.is_unspecified
            or address in METADATA_IPS
        ):
            raise CallbackRefused(f"callback host {host!r} resolves to a non-public address ({address})")


def new_delivery(job: ReportJob, delivery_id: str) -> CallbackDelivery | None:
    """The outbox row for a job that just became terminal (None without a callback_url)."""
    if not job.callback_url:
        return None
    now = utcnow()
    return CallbackDelivery(
        id=delivery_id,
        job_id=job.id,
        tenant=job.tenant,
        url=job.callback_url,
        event=f"job.{job.status.value}",
        payload=job_document(job),
        next_attempt_at=now,
        created_at=now,
    )


@dataclass(frozen=True)
class DeliveryOutcome:
    detail: str
    retry_in_s: float | None = None


async def deliver(delivery_id: str) -> DeliveryOutcome:
    settings = get_settings()
    now = utcnow()
    async with session_scope() as session:
        row = await Repository(session).get_delivery(delivery_id)
    if row is None or row.status != CallbackStatus.PENDING:
        return DeliveryOutcome("nothing to deliver")
    if row.next_attempt_at > now:
        return DeliveryOutcome("not due", retry_in_s=(row.next_attempt_at - now).total_seconds())
    error = await _post(row, settings)
    attempts = row.attempts + 1
    async with session_scope() as session:
        repo = Repository(session)
        if error is None:
            await repo.record_delivery(row, CallbackStatus.DELIVERED, attempts, None, None, utcnow())
            return DeliveryOutcome("delivered")
        if attempts >= settings.callback_max_attempts:
            await repo.record_delivery(row, CallbackStatus.FAILED, attempts, error, None, None)
            log.warning(
                "callback given up", extra={"job_id": row.job_id, "attempts": attempts, "error": error}
            )
            return DeliveryOutcome(f"failed after {attempts} tries: {error}")
        delays = settings.callback_retry_delays_s or [60.0]
        delay_s = delays[min(attempts, len(delays)) - 1]
        next_at = utcnow() + timedelta(seconds=delay_s)
        await repo.record_delivery(row, CallbackStatus.PENDING, attempts, error, next_at, None)
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
        ids = await Repository(session).due_delivery_ids(utcnow(), limit)
    published = 0
    for delivery_id in ids:
        if await queue.enqueue_callback(delivery_id):
            published += 1
    return published
