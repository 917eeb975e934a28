"""Feishu (Lark) custom-bot webhook with signature verification; success is HTTP 200 with `code == 0`.

The signature goes in the JSON body: `timestamp` (unix seconds, as a string) and
`sign = base64(HMAC-SHA256(key=f"{timestamp}\\n{secret}", msg=b""))`. The bot refuses timestamps more than an
hour away and allows 5 messages a second (100 a minute); messages to one bot are spaced accordingly.
"""

from __future__ import annotations

from typing import Any

import httpx

from app.dead_letters.sinks.base import AlertDeliveryError, AlertMessage
from app.destinations.senders.robots import feishu_accepted as accepted
from app.destinations.senders.robots import feishu_card, feishu_signed, feishu_space


def card_body(message: AlertMessage) -> dict[str, Any]:
    """An interactive card: the title in a red header, the markdown (minus its own heading) as the body."""
    return feishu_card(message.title, message.markdown, "red")


def signed_body(message: AlertMessage, secret: str | None, timestamp_s: int | None = None) -> dict[str, Any]:
    return feishu_signed(card_body(message), secret, timestamp_s)


class FeishuSink:
    name = "feishu"

    def __init__(self, webhook_url: str, secret: str | None, timeout_s: float = 5.0) -> None:
        self._url = webhook_url
        self._secret = secret
        self._timeout_s = timeout_s

    async def send(self, message: AlertMessage) -> None:
        await feishu_space(self._url)
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
