"""DingTalk custom-robot webhook with signing; an answer with `errcode != 0` counts as a failure.

The signing scheme is the DingTalk destination's (app.destinations.senders.robots).
"""

from __future__ import annotations

import httpx

from app.dead_letters.sinks.base import AlertDeliveryError, AlertMessage
from app.destinations.senders.robots import dingtalk_signed_url as signed_url


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
