"""DingTalk custom-robot webhook with signing; an answer with `errcode != 0` counts as a failure.

sign = urlencode(base64(HMAC-SHA256(secret, f"{timestamp}\\n{secret}"))), timestamp in milliseconds.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import urllib.parse

import httpx

from app.dead_letters.sinks.base import AlertDeliveryError, AlertMessage


def sign(secret: str, timestamp_ms: int) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256).digest()
    return urllib.parse.quote_plus(base64.b64encode(digest))


def signed_url(webhook_url: str, secret: str | None, timestamp_ms: int | None = None) -> str:
    if not secret:
        return webhook_url
    ts = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
    sep = "&" if "?" in webhook_url else "?"
    return f"{webhook_url}{sep}timestamp={ts}&sign={sign(secret, ts)}"


class DingTalkSink:
    name = "dingtalk"

    def __init__(self, webhook_url: str, secret: str | None, timeout_s: float = 5.0) -> None:
        self._url = webhook_url
        self._secret = secret
        self._timeout_s = timeout_s

    async def send(self, message: AlertMessage) -> None:
        body = {"msgtype": "markdown", "markdown": {"title": message.title, "text": message.markdown}}
        try:
            async with httpx.AsyncClient(timeout=self._timeout_s) as client:
                resp = await client.post(signed_url(self._url, self._secret), json=body)
        except httpx.HTTPError as exc:
            raise AlertDeliveryError(f"dingtalk unreachable: {type(exc).__name__}") from exc
        if resp.status_code != 200:
            raise AlertDeliveryError(f"dingtalk answered HTTP {resp.status_code}")
        try:
            answer = resp.json()
        except ValueError as exc:
            raise AlertDeliveryError("dingtalk answered with a non-JSON body") from exc
        if answer.get("errcode", -1) != 0:
            raise AlertDeliveryError(
                f"dingtalk errcode {answer.get('errcode')}: {answer.get('errmsg', '')[:200]}"
            )
