"""Generic JSON webhook: POST `{"title", "markdown", "job_ids", "sent_at"}`; any 2xx answer is success.

Signed like completion callbacks (`app.core.signing`) with ALERT_WEBHOOK_SECRET, plus
`X-Report-Event: dead_letters`.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import httpx

from app.core.signing import EVENT_HEADER, SIGNATURE_HEADER, sign
from app.dead_letters.sinks.base import AlertDeliveryError, AlertMessage

EVENT = "dead_letters"


def payload(message: AlertMessage, sent_at: datetime | None = None) -> bytes:
    when = (sent_at or datetime.now(UTC)).astimezone(UTC)
    document = {
        "title": message.title,
        "markdown": message.markdown,
        "job_ids": list(message.job_ids),
        "sent_at": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


class WebhookSink:
    name = "webhook"

    def __init__(self, url: str, secret: str | None, timeout_s: float = 5.0) -> None:
        self._url = url
        self._secret = secret
        self._timeout_s = timeout_s

    async def send(self, message: AlertMessage) -> None:
        body = payload(message)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "report-orchestrator-alerts/1",
            EVENT_HEADER: EVENT,
        }
        if self._secret:
            headers[SIGNATURE_HEADER] = sign(self._secret, int(time.time()), body)
        try:
            async with httpx.AsyncClient(timeout=self._timeout_s, follow_redirects=False) as client:
                resp = await client.post(self._url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise AlertDeliveryError(f"webhook unreachable: {type(exc).__name__}") from exc
        if not 200 <= resp.status_code < 300:
            raise AlertDeliveryError(f"webhook answered HTTP {resp.status_code}")
