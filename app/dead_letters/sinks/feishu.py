"""Feishu (Lark) custom-bot webhook with signature verification; success is HTTP 200 with `code == 0`.

The signature goes in the JSON body: `timestamp` (unix seconds, as a string) and
`sign = base64(HMAC-SHA256(key=f"{timestamp}\\n{secret}", msg=b""))`. The bot refuses timestamps more than an
hour away and allows 5 messages a second (100 a minute); messages to one bot are spaced accordingly.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time
from typing import Any

import httpx

from app.dead_letters.sinks.base import AlertDeliveryError, AlertMessage

# Feishu allows 5 messages a second per bot: keep at least this long between two messages to one URL.
MIN_INTERVAL_S = 0.25
_last_sent: dict[str, float] = {}


def sign(secret: str, timestamp_s: int) -> str:
    digest = hmac.new(f"{timestamp_s}\n{secret}".encode(), b"", hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def card_body(message: AlertMessage) -> dict[str, Any]:
    """An interactive card: the title in a red header, the markdown (minus its own heading) as the body."""
    lines = message.markdown.split("\n")
    if lines and lines[0].startswith("#"):
        lines = lines[1:]
    return {
        "msg_type": "interactive",
        "card": {
            "config": {"wide_screen_mode": True},
            "header": {"title": {"tag": "plain_text", "content": message.title}, "template": "red"},
            "elements": [{"tag": "markdown", "content": "\n".join(lines).strip()}],
        },
    }


def signed_body(message: AlertMessage, secret: str | None, timestamp_s: int | None = None) -> dict[str, Any]:
    body = card_body(message)
    if not secret:
        return body
    ts = timestamp_s if timestamp_s is not None else int(time.time())
    return {"timestamp": str(ts), "sign": sign(secret, ts), **body}


def accepted(answer: Any) -> bool:
    """`code == 0` (current API) or, from older endpoints, `StatusCode == 0`."""
    if not isinstance(answer, dict):
        return False
    if "code" in answer:
        return answer["code"] == 0
    return "StatusCode" in answer and answer["StatusCode"] == 0


class FeishuSink:
    name = "feishu"

    def __init__(self, webhook_url: str, secret: str | None, timeout_s: float = 5.0) -> None:
        self._url = webhook_url
        self._secret = secret
        self._timeout_s = timeout_s

    async def _space(self) -> None:
        wait_s = _last_sent.get(self._url, 0.0) + MIN_INTERVAL_S - time.monotonic()
        if wait_s > 0:
            await asyncio.sleep(wait_s)
        _last_sent[self._url] = time.monotonic()

    async def send(self, message: AlertMessage) -> None:
        await self._space()
        try:
            async with httpx.AsyncClient(timeout=self._timeout_s) as client:
                resp = await client.post(self._url, json=signed_body(message, self._secret))
        except httpx.HTTPError as exc:
            raise AlertDeliveryError(f"feishu unreachable: {type(exc).__name__}") from exc
        if resp.status_code != 200:
            raise AlertDeliveryError(f"feishu answered HTTP {resp.status_code}")
        try:
            answer = resp.json()
        except ValueError as exc:
            raise AlertDeliveryError("feishu answered with a non-JSON body") from exc
        if not accepted(answer):
            code = answer.get("code", answer.get("StatusCode")) if isinstance(answer, dict) else None
            msg = answer.get("msg", answer.get("StatusMessage", "")) if isinstance(answer, dict) else ""
            raise AlertDeliveryError(f"feishu code {code}: {str(msg)[:200]}")
