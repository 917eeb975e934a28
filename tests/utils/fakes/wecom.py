"""A real local HTTP server that behaves like a WeCom (企业微信) group robot, for destination tests.

Checks the webhook `key` (else errcode 93000), the message's shape and markdown size, enforces 20 messages a
minute (errcode 45009), and can be told to answer an errcode, HTTP 500, or hang for the next requests.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from tests.utils.fakes.server import FakeServer

KEY = "693a91f6-7xxx-4bc4-97a0-0ec2sifa5aaa"
MARKDOWN_MAX_BYTES = 4096


@dataclass
class Received:
    at: float
    body: dict[str, Any]
    accepted: bool
    reason: str = ""

    @property
    def msgtype(self) -> str:
        return str(self.body.get("msgtype", ""))

    @property
    def content(self) -> str:
        """The markdown or text content."""
        return str(self.body.get(self.msgtype, {}).get("content", ""))

    @property
    def mentioned_mobiles(self) -> list[str]:
        return list(self.body.get("text", {}).get("mentioned_mobile_list", []))


@dataclass
class FakeWeCom(FakeServer):
    key: str = KEY
    limit_per_minute: int = 20
    script: list[str] = field(default_factory=list)  # behaviours for the next requests: errcode|http500|hang
    received: list[Received] = field(default_factory=list)
    hang_s: float = 30.0

    @property
    def url_path(self) -> str:  # type: ignore[override]
        return f"/cgi-bin/webhook/send?key={self.key}"

    def url_with_key(self, key: str) -> str:
        """This robot's URL with another key (what a mistyped webhook URL looks like)."""
        return self.url.replace(f"key={self.key}", f"key={key}")

    @staticmethod
    def problem(body: dict[str, Any]) -> str | None:
        """Why WeCom would refuse this body's shape, or None."""
        kind = body.get("msgtype")
        if kind not in ("markdown", "text") or not isinstance(body.get(kind), dict):
            return "msgtype"
        content = body[kind].get("content")
        if not isinstance(content, str) or not content:
            return "content"
        limit = MARKDOWN_MAX_BYTES if kind == "markdown" else 2048
        return "size" if len(content.encode()) > limit else None

    def respond(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, Any] | None]:
        now = time.time()
        body = json.loads(raw or b"{}")
        behaviour = self.next_behaviour()
        scripted = self.scripted(
            behaviour,
            {"errcode": {"errcode": -1, "errmsg": "system error"}},
        )
        if scripted is not None:
            self.received.append(Received(now, body, False, behaviour))
            return scripted
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
        if query.get("key") != [self.key]:
            self.received.append(Received(now, body, False, "key"))
            return 200, {
                "errcode": 93000,
                "errmsg": "invalid webhook url, hint: [1732634400_0123456789abcdef], from ip: 127.0.0.1",
            }
        problem = self.problem(body)
        if problem is not None:
            self.received.append(Received(now, body, False, problem))
            return 200, {"errcode": 40058 if problem == "size" else 40008, "errmsg": f"invalid {problem}"}
        limits = [(self.limit_per_minute, 60.0)]
        if not self.admit(now, limits, Received(now, body, True), Received(now, body, False, "rate")):
            return 200, {"errcode": 45009, "errmsg": "api freq out of limit"}
        return 200, {"errcode": 0, "errmsg": "ok"}

    @property
    def accepted(self) -> list[Received]:
        return [r for r in self.received if r.accepted]
