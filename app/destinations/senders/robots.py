"""Chat robots (DingTalk, Feishu) and the signed webhook as destinations: the signing schemes (shared with the
dead-letter alert sinks) and one guarded, pinned POST each (a tenant's URL passes the SSRF guard).

DingTalk: `sign = urlencode(base64(HMAC-SHA256(secret, f"{timestamp_ms}\\n{secret}")))` in the query; success
is `errcode == 0`. Feishu: `timestamp` (s) and `sign = base64(HMAC-SHA256(key=f"{ts}\\n{secret}", msg=b""))`
in the body, at most 5 messages a second a bot; success is `code == 0`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
import urllib.parse
from typing import Any

import httpx

from app.core.config import Settings
from app.core.signing import EVENT_HEADER, SIGNATURE_HEADER
from app.core.signing import sign as sign_body
from app.destinations.senders.base import Message, SendError
from app.http.pinned import post_pinned
from app.http.ssrf import CallbackRefused, check_url

FEISHU_MIN_INTERVAL_S = 0.25  # Feishu allows 5 messages a second per bot
_feishu_last_sent: dict[str, float] = {}


def dingtalk_sign(secret: str, timestamp_ms: int) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256).digest()
    return urllib.parse.quote_plus(base64.b64encode(digest))


def dingtalk_signed_url(webhook_url: str, secret: str | None, timestamp_ms: int | None = None) -> str:
    if not secret:
        return webhook_url
    ts = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
    sep = "&" if "?" in webhook_url else "?"
    return f"{webhook_url}{sep}timestamp={ts}&sign={dingtalk_sign(secret, ts)}"


def feishu_sign(secret: str, timestamp_s: int) -> str:
    digest = hmac.new(f"{timestamp_s}\n{secret}".encode(), b"", hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def feishu_card(title: str, markdown: str, template: str) -> dict[str, Any]:
    """An interactive card: the title in a coloured header, the markdown (minus its own heading) as body."""
    lines = markdown.split("\n")
    if lines and lines[0].startswith("#"):
        lines = lines[1:]
    return {
        "msg_type": "interactive",
        "card": {
            "config": {"wide_screen_mode": True},
            "header": {"title": {"tag": "plain_text", "content": title}, "template": template},
            "elements": [{"tag": "markdown", "content": "\n".join(lines).strip()}],
        },
    }


def feishu_signed(body: dict[str, Any], secret: str | None, timestamp_s: int | None = None) -> dict[str, Any]:
    if not secret:
        return body
    ts = timestamp_s if timestamp_s is not None else int(time.time())
    return {"timestamp": str(ts), "sign": feishu_sign(secret, ts), **body}


def feishu_accepted(answer: Any) -> bool:
    """`code == 0` (current API) or, from older endpoints, `StatusCode == 0`."""
    if not isinstance(answer, dict):
        return False
    if "code" in answer:
        return answer["code"] == 0
    return "StatusCode" in answer and answer["StatusCode"] == 0


async def feishu_space(url: str) -> None:
    wait_s = _feishu_last_sent.get(url, 0.0) + FEISHU_MIN_INTERVAL_S - time.monotonic()
    if wait_s > 0:
        await asyncio.sleep(wait_s)
    _feishu_last_sent[url] = time.monotonic()


async def post_guarded(
    what: str, url: str, body: bytes, headers: dict[str, str], settings: Settings, timeout_s: float
) -> httpx.Response:
    """POST through the SSRF guard to the address it approved; errors name `what`, never the URL (a robot's
    URL carries its token)."""
    try:
        addresses = await check_url(url, settings, what="destination")
    except CallbackRefused as exc:
        raise SendError(f"{what}: {exc}") from exc
    try:
        return await post_pinned(
            url, addresses, body, {"Content-Type": "application/json", **headers}, timeout_s
        )
    except httpx.HTTPError as exc:
        raise SendError(f"{what} unreachable: {type(exc).__name__}") from exc


def answer_of(what: str, resp: httpx.Response) -> Any:
    if resp.status_code != 200:
        raise SendError(f"{what} answered HTTP {resp.status_code}")
    try:
        return resp.json()
    except ValueError as exc:
        raise SendError(f"{what} answered with a non-JSON body") from exc


def _json(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


class DingTalkSender:
    def __init__(
        self, url: str, secret: str | None, at_mobiles: list[str], at_all: bool, settings: Settings
    ) -> None:
        self._url, self._secret, self._settings = url, secret, settings
        self._at_mobiles, self._at_all = at_mobiles, at_all

    async def send(self, message: Message) -> None:
        mentions = " ".join(f"@{m}" for m in self._at_mobiles)
        text = f"{message.markdown}\n\n{mentions}" if mentions else message.markdown
        body = {
            "msgtype": "markdown",
            "markdown": {"title": message.title, "text": text},
            "at": {"atMobiles": self._at_mobiles, "isAtAll": self._at_all},
        }
        url = dingtalk_signed_url(self._url, self._secret)
        resp = await post_guarded(
            "dingtalk", url, _json(body), {}, self._settings, self._settings.delivery_timeout_s
        )
        answer = answer_of("dingtalk", resp)
        if not isinstance(answer, dict) or answer.get("errcode", -1) != 0:
            code = answer.get("errcode") if isinstance(answer, dict) else None
            msg = str(answer.get("errmsg", ""))[:200] if isinstance(answer, dict) else ""
            raise SendError(f"dingtalk errcode {code}: {msg}")


class FeishuSender:
    def __init__(self, url: str, secret: str | None, settings: Settings) -> None:
        self._url, self._secret, self._settings = url, secret, settings

    async def send(self, message: Message) -> None:
        await feishu_space(self._url)
        body = feishu_signed(feishu_card(message.title, message.markdown, "green"), self._secret)
        resp = await post_guarded(
            "feishu", self._url, _json(body), {}, self._settings, self._settings.delivery_timeout_s
        )
        answer = answer_of("feishu", resp)
        if not feishu_accepted(answer):
            code = answer.get("code", answer.get("StatusCode")) if isinstance(answer, dict) else None
            msg = answer.get("msg", answer.get("StatusMessage", "")) if isinstance(answer, dict) else ""
            raise SendError(f"feishu code {code}: {str(msg)[:200]}")


class WebhookSender:
    """POSTs the report's document (`event: report.delivered`) or an owners' notice (`report.notice`), signed
    like callbacks with the destination's own secret; any 2xx is accepted. `Idempotency-Key` is the
    delivery's id: a receiver can drop a repeat."""

    def __init__(self, url: str, secret: str, delivery_id: str, settings: Settings) -> None:
        self._url, self._secret, self._id, self._settings = url, secret, delivery_id, settings

    async def send(self, message: Message) -> None:
        event = "report.notice" if "notice" in (message.document or {}) else "report.delivered"
        body = _json(
            {
                "event": event,
                "title": message.title,
                "link": message.link,
                **(message.document or {}),
            }
        )
        headers = {
            "User-Agent": "report-orchestrator-deliveries/1",
            SIGNATURE_HEADER: sign_body(self._secret, int(time.time()), body),
            EVENT_HEADER: event,
            "Idempotency-Key": self._id,
        }
        resp = await post_guarded(
            "webhook", self._url, body, headers, self._settings, self._settings.delivery_timeout_s
        )
        if not 200 <= resp.status_code < 300:
            raise SendError(f"webhook answered HTTP {resp.status_code}")
