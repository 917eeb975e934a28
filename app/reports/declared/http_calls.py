"""One attempt of an HTTP report type: the signed request to the team's service (pinned to the addresses
the SSRF guard approved), then either the file it answers (sync) or, after its 202, the outcome it reports
through the attempt's callback URL (async), polled from remote_attempts.

HTTP 4xx but 408/429 is permanent; 5xx, 408, 429, connection errors and timeouts are retryable.
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
import re
import time
import urllib.parse
from datetime import UTC, datetime
from typing import Any

import httpx

from app.core.attempt_tokens import TokenSecretMissing, claim_for, mint
from app.core.config import Settings, get_settings
from app.core.db import is_db_outage
from app.core.signing import EVENT_HEADER, SIGNATURE_HEADER, sign
from app.core.times import stamp
from app.http.pinned import stream_pinned
from app.http.ssrf import CallbackRefused, HostUnresolved, IPAddress, check_url
from app.http.token_paths import ATTEMPT_CALLBACKS_PREFIX
from app.models import RemoteAttempt
from app.reports import remote
from app.reports.base import PermanentError, ReportContext
from app.reports.declared.http_spec import HttpSpec, render_header, render_url
from app.reports.registry import registry

ROWS_HEADER = "X-Report-Rows"
ATTEMPT_HEADER = "X-Report-Attempt"
USER_AGENT = "report-orchestrator-http-reports/1"
EXCERPT_CHARS = 500
#: Token lifetime past the attempt's own time limit (the token also dies with its attempt, whatever this).
TOKEN_SLACK_S = 300.0
_FILENAME_STAR = re.compile(r"filename\*\s*=\s*(?:UTF-8|utf-8)''([^;]+)")
_FILENAME = re.compile(r'filename\s*=\s*(?:"([^"]*)"|([^;\s]+))')


class HttpReportError(Exception):
    """A retryable failure of the call (5xx, 408, 429, a connection error or timeout, the service silent)."""


def _values(params: Any) -> dict[str, Any]:
    dump = getattr(params, "model_dump", None)
    return dict(dump(mode="json")) if callable(dump) else dict(params or {})


def _excerpt(data: bytes) -> str:
    text = data[: EXCERPT_CHARS * 4].decode("utf-8", errors="replace")
    return text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "")


async def _addresses(url: str, settings: Settings) -> list[IPAddress]:
    try:
        return await check_url(url, settings, what="HTTP report", allow=settings.http_report_allowed_hosts)
    except HostUnresolved as exc:
        raise HttpReportError(str(exc)) from None
    except CallbackRefused as exc:
        raise PermanentError(
            f"{exc}: refused; list the host in HTTP_REPORT_ALLOWED_HOSTS to allow it"
        ) from None


def _callback(spec: HttpSpec, ctx: ReportContext, nonce: str, settings: Settings) -> dict[str, Any]:
    """The per-attempt callback URL (signed, scoped to this run of the attempt, expiring) for the body."""
    rtype = registry.get(spec.name)  # a declared type's timeout_s is the loader's (not in the spec)
    timeout_s = spec.attempt_ttl_s or (rtype.timeout_s if rtype is not None else None)
    ttl_s = (timeout_s or settings.job_timeout_s) + TOKEN_SLACK_S
    claim = claim_for(ctx.job_id, ctx.replay, ctx.attempt, ctx.tenant, nonce, ttl_s)
    try:
        token = mint(claim, settings)
    except TokenSecretMissing as exc:
        raise PermanentError(str(exc)) from None
    base = settings.public_base_url.rstrip("/") + f"{ATTEMPT_CALLBACKS_PREFIX}/{token}"
    return {
        "url": base,
        "heartbeat_url": f"{base}/heartbeat",
        "progress_url": f"{base}/progress",
        "complete_url": f"{base}/complete",
        "fail_url": f"{base}/fail",
        "expires_at": stamp(datetime.fromtimestamp(claim.expires_at_s, UTC)),
        "heartbeat_timeout_s": spec.heartbeat_timeout_s,
    }


def _request(
    spec: HttpSpec,
    ctx: ReportContext,
    values: dict[str, Any],
    callback: dict[str, Any] | None,
    nonce: str | None = None,
) -> tuple[str, bytes | None, dict[str, str]]:
    """The URL, body and headers of the call: the envelope as JSON (POST, PUT) or in the query (GET), signed
    like our callbacks: `t=<unix s>,v1=<HMAC-SHA256 of "<t>." + body>` (GET: of the query string)."""
    secret = spec.signing_secret()
    if secret is None:
        raise PermanentError(f"HTTP report {spec.name}: the signing secret ({spec.secret_env}) is not set")
    url = render_url(spec.url, values)
    envelope: dict[str, Any] = {
        "report_type": spec.name,
        "job_id": ctx.job_id,
        "attempt": ctx.attempt,
        "replay": ctx.replay,
        "tenant": ctx.tenant,
        "mode": spec.mode,
        "params": values,
    }
    if ctx.scheduled_for is not None:
        envelope["scheduled_for"] = stamp(ctx.scheduled_for)
    if callback is not None:
        envelope["callback"] = callback
    headers: dict[str, str] = {}
    for name, template in spec.headers.items():
        try:
            headers[name] = render_header(template, values, f"headers.{name}")
        except ValueError as exc:
            raise PermanentError(str(exc)) from None
    body: bytes | None
    if spec.method == "GET":
        query = urllib.parse.urlencode(
            {
                k: json.dumps(v, separators=(",", ":")) if isinstance(v, dict) else v
                for k, v in envelope.items()
            }
        )
        split = urllib.parse.urlsplit(url)
        query = f"{split.query}&{query}" if split.query else query
        url = urllib.parse.urlunsplit(split._replace(query=query))
        body, signed = None, query.encode()
    else:
        body = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode()
        signed = body
        headers["Content-Type"] = "application/json"
    headers.update(
        {
            "User-Agent": USER_AGENT,
            SIGNATURE_HEADER: sign(secret, int(time.time()), signed),
            EVENT_HEADER: "report.run",
            ATTEMPT_HEADER: f"{ctx.job_id}/r{ctx.replay}-a{ctx.attempt}",
            # One run of one attempt: an attempt handed back at shutdown runs again under a new token, and a
            # service that honours the key must take the new run as new work.
            "Idempotency-Key": f"{ctx.job_id}-r{ctx.replay}-a{ctx.attempt}" + (f"-{nonce}" if nonce else ""),
        }
    )
    return url, body, headers


async def _refuse_status(response: httpx.Response, spec: HttpSpec) -> None:
    """Raise for an answer that is not the expected success: permanent for 4xx but 408/429, else retryable."""
    status = response.status_code
    excerpt = _excerpt(await _read_some(response))
    what = f"HTTP report {spec.name}: the service answered {status}"
    if 400 <= status < 500 and status not in (408, 429):
        raise PermanentError(f"{what}: {excerpt}")
    if status >= 500 or status in (408, 429):
        raise HttpReportError(f"{what}: {excerpt}")
    if 300 <= status < 400:
        raise PermanentError(f"{what} (redirects are not followed): {response.headers.get('location', '')}")
    expected = "200 with the file" if spec.mode == "sync" else "202"
    raise PermanentError(f"{what}, expected {expected}: {excerpt}")


async def _read_some(response: httpx.Response, limit: int = EXCERPT_CHARS * 4) -> bytes:
    data = b""
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) >= limit:
            break
    return data


def _filename(response: httpx.Response, spec: HttpSpec, content_type: str) -> str:
    disposition = response.headers.get("content-disposition", "")
    star = _FILENAME_STAR.search(disposition)
    if star:
        return urllib.parse.unquote(star.group(1).strip().strip('"'))
    plain = _FILENAME.search(disposition)
    if plain:
        return plain.group(1) or plain.group(2) or ""
    ext = mimetypes.guess_extension(content_type.split(";", 1)[0].strip()) or ".bin"
    return f"{spec.name.replace('.', '_')}{ext}"


def _rows(response: httpx.Response) -> int | None:
    value = response.headers.get(ROWS_HEADER, "").strip()
    return int(value) if value.isdigit() else None


async def _save_answer(response: httpx.Response, spec: HttpSpec, ctx: ReportContext) -> None:
    """Stream the answered file into the attempt's output (content type, name and rows from its headers)."""
    content_type = (response.headers.get("content-type") or "application/octet-stream")[:100]
    rows = _rows(response)
    if rows is not None:
        ctx.set_rows(rows)
    with ctx.output(_filename(response, spec, content_type), content_type, binary=True) as fh:
        async for chunk in response.aiter_bytes():
            fh.write(chunk)


async def run_http_report(spec: HttpSpec, ctx: ReportContext, params: Any) -> None:
    settings = get_settings()
    values = _values(params)
    try:
        url = render_url(spec.url, values)
    except ValueError as exc:
        raise PermanentError(f"HTTP report {spec.name}: {exc}") from None
    addresses = await _addresses(url, settings)
    callback = None
    nonce = None
    if spec.mode == "async":
        nonce, reported = await remote.hand_over(ctx.job_id, ctx.replay, ctx.attempt, ctx.tenant)
        if reported is not None:  # reported before this attempt was handed back: taken, no second call
            _take_outcome(reported, ctx, spec)
            return
        callback = _callback(spec, ctx, nonce, settings)
    url, body, headers = _request(spec, ctx, values, callback, nonce)
    try:
        async with stream_pinned(
            spec.method, url, addresses, body, headers, spec.request_timeout_s
        ) as response:
            if spec.mode == "sync" and response.status_code == 200:
                await _save_answer(response, spec, ctx)
                return
            if spec.mode == "async" and response.status_code in (200, 201, 202, 204):
                await response.aclose()
            else:
                await _refuse_status(response, spec)
    except httpx.HTTPError as exc:
        raise HttpReportError(f"HTTP report {spec.name}: {type(exc).__name__}: {str(exc)[:200]}") from None
    await _await_outcome(spec, ctx, time.monotonic())


async def _await_outcome(spec: HttpSpec, ctx: ReportContext, accepted_at: float) -> None:
    """Poll the attempt's row until the service reports the outcome, or stays silent too long. The worker's
    own heartbeat keeps the attempt alive meanwhile (and stops it on a cancel)."""
    interval_s = min(0.5, spec.heartbeat_timeout_s / 4)
    last_seen = accepted_at
    seen_at: datetime | None = None  # the row's, as first read: the handover, or the service's first word
    while True:
        await asyncio.sleep(interval_s)
        try:
            row = await remote.poll(ctx.job_id, ctx.replay, ctx.attempt)
        except Exception as exc:
            if not is_db_outage(exc):
                raise
            row = None  # a MySQL blip: the silence check still runs on what we last saw
        if row is not None:
            if seen_at is not None and row.seen_at != seen_at:
                last_seen = time.monotonic()
            seen_at = row.seen_at
            if row.progress is not None:
                ctx.set_progress(row.progress)
            if row.outcome is not None:
                _take_outcome(row, ctx, spec)
                return
        if time.monotonic() - last_seen > spec.heartbeat_timeout_s:
            raise HttpReportError(
                f"HTTP report {spec.name}: the service was silent for over {spec.heartbeat_timeout_s:g} s"
                " (no heartbeat)"
            )


def _take_outcome(row: RemoteAttempt, ctx: ReportContext, spec: HttpSpec) -> None:
    if row.outcome == "succeeded" and row.output_path and row.output_filename:
        if row.output_rows is not None:
            ctx.set_rows(row.output_rows)
        ctx.output_info = remote.output_of(row)
        return
    error = remote.error_of(row)
    message = f"HTTP report {spec.name}: {error['message']}"
    if error["retryable"]:
        raise HttpReportError(message)
    raise PermanentError(message)
