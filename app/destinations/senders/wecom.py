"""WeCom (企业微信) group-robot destination: a report as one markdown message, accepted on HTTP 200 with
`errcode == 0`; the webhook URL's `key` is the secret and never appears in an error text.

The markdown is `## <title>` then the message's markdown, cut to WeCom's 4,096 UTF-8 bytes with an ellipsis,
the download link kept after the cut. WeCom markdown messages cannot mention by mobile number, so when
mentions are configured a second, `text` message follows with `mentioned_mobile_list` (["@all"] for everyone);
if only that second message fails, the send fails and a retry repeats the report (a duplicate rather than a
silent miss). WeCom allows 20 messages a minute per robot: messages to one URL are spaced 3 s apart in this
process (two processes sending to one robot can still meet its limit, errcode 45009, which a retry absorbs).
Given `settings`, the URL passes the SSRF guard (`app.http.ssrf`); the POST is pinned to the approved address.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from typing import Any

import httpx

from app.core.config import Settings
from app.destinations.senders.base import Message, SendError
from app.http.pinned import post_pinned
from app.http.ssrf import CallbackRefused, IPAddress, check_url

MARKDOWN_MAX_BYTES = 4096
TEXT_MAX_BYTES = 2048
ELLIPSIS = "\n…"
# 20 messages a minute per robot: at least this long between two messages to one URL.
MIN_INTERVAL_S = 60 / 20
MAX_WAIT_S = 10.0  # the longest a send waits for its slot (well inside a delivery's lease)
_next_slot: dict[str, float] = {}


def cut_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` that fits in `max_bytes` UTF-8 bytes, never half a character."""
    raw = text.encode()
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode(errors="ignore")


def markdown_content(message: Message, max_bytes: int = MARKDOWN_MAX_BYTES) -> str:
    """`## title`, a blank line, the markdown; cut to `max_bytes` with an ellipsis, the link kept at the
    end."""
    full = f"## {message.title}\n\n{message.markdown}".rstrip()
    if len(full.encode()) <= max_bytes:
        return full
    tail = ELLIPSIS + (f"\n\n[Download]({message.link})" if message.link else "")
    head = cut_utf8(full, max_bytes - len(tail.encode()))
    # Prefer cutting at a line break near the end, so no markdown construct (a link, a table row) is split.
    line_end = head.rfind("\n")
    if line_end > len(head) - 400 and line_end > 0:
        head = head[:line_end]
    return head.rstrip() + tail


def mention_body(message: Message, mobiles: list[str], mention_all: bool) -> dict[str, Any] | None:
    """The follow-up `text` message that mentions people, or None when nobody is to be mentioned."""
    mentioned = [*mobiles, *(["@all"] if mention_all else [])]
    if not mentioned:
        return None
    return {
        "msgtype": "text",
        "text": {"content": cut_utf8(message.title, TEXT_MAX_BYTES), "mentioned_mobile_list": mentioned},
    }


def _key(webhook_url: str) -> str:
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(webhook_url).query)
    return (query.get("key") or [""])[0]


class WeComSender:
    kind = "wecom"

    def __init__(
        self,
        webhook_url: str,
        mentioned_mobiles: list[str] | None = None,
        mention_all: bool = False,
        timeout_s: float = 5.0,
        settings: Settings | None = None,
    ) -> None:
        """With `settings`, every POST passes the SSRF guard and goes to the address it approved (as for the
        other robots: production builds senders that way); without, a direct POST (tests, trusted URLs)."""
        self._url = webhook_url
        self._settings = settings
        self._key = _key(webhook_url)
        self._mobiles = list(mentioned_mobiles or [])
        self._mention_all = mention_all
        self._timeout_s = timeout_s

    async def _space(self) -> None:
        """Book the next free slot for this URL (no await between reading and booking), then wait for it; a
        slot further than MAX_WAIT_S away is not booked: the send fails now (retried later) instead of
        sleeping through its delivery's lease."""
        now = time.monotonic()
        slot = max(now, _next_slot.get(self._url, 0.0))
        if slot - now > MAX_WAIT_S:
            raise SendError(f"wecom robot busy: its next free slot is {slot - now:.0f} s away")
        _next_slot[self._url] = slot + MIN_INTERVAL_S
        if slot > now:
            await asyncio.sleep(slot - now)

    def _safe(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    async def _post(self, body: dict[str, Any], addresses: list[IPAddress] | None) -> None:
        await self._space()
        content = json.dumps(body, ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json"}
        try:
            if addresses is not None:
                resp = await post_pinned(self._url, addresses, content, headers, self._timeout_s)
            else:
                async with httpx.AsyncClient(timeout=self._timeout_s, follow_redirects=False) as client:
                    resp = await client.post(self._url, content=content, headers=headers)
        except httpx.HTTPError as exc:
            raise SendError(f"wecom unreachable: {type(exc).__name__}") from None
        if resp.status_code != 200:
            raise SendError(f"wecom answered HTTP {resp.status_code}")
        try:
            answer = resp.json()
        except ValueError:
            raise SendError("wecom answered with a non-JSON body") from None
        if not isinstance(answer, dict) or answer.get("errcode", -1) != 0:
            code = answer.get("errcode") if isinstance(answer, dict) else None
            msg = str(answer.get("errmsg", "")) if isinstance(answer, dict) else ""
            raise SendError(self._safe(f"wecom errcode {code}: {msg[:200]}"))

    async def send(self, message: Message) -> None:
        body = {"msgtype": "markdown", "markdown": {"content": markdown_content(message)}}
        mention = mention_body(message, self._mobiles, self._mention_all)
        addresses: list[IPAddress] | None = None
        if self._settings is not None:
            try:
                addresses = await check_url(self._url, self._settings, what="destination")
            except CallbackRefused as exc:
                raise SendError(self._safe(f"wecom: {exc}")) from None
        await self._post(body, addresses)
        if mention is not None:
            await self._post(mention, addresses)
