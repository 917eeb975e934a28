"""A real local HTTP server that behaves like a DingTalk custom robot, for alert tests.

Checks the signature like DingTalk does, enforces 20 messages a minute, and can be told to answer
errcode 130101, HTTP 500, or hang for the next requests.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from tests.utils.fakes.server import FakeServer

SECRET = "SEC0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"


@dataclass
class Received:
    at: float
    body: dict[str, Any]
    accepted: bool
    reason: str = ""

    @property
    def text(self) -> str:
        return str(self.body.get("markdown", {}).get("text", ""))


@dataclass
class FakeDingTalk(FakeServer):
    url_path = "/robot/send?access_token=test-token"
    secret: str = SECRET
    limit_per_minute: int = 20
    script: list[str] = field(default_factory=list)  # behaviours for the next requests: errcode|http500|hang
    received: list[Received] = field(default_factory=list)
    hang_s: float = 30.0

    def valid_signature(self, path: str) -> bool:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
        try:
            timestamp = int(query["timestamp"][0])
            given = query["sign"][0]
        except (KeyError, ValueError):
            return False
        if abs(time.time() * 1000 - timestamp) > 3600_000:
            return False
        digest = hmac.new(
            self.secret.encode(), f"{timestamp}\n{self.secret}".encode(), hashlib.sha256
        ).digest()
        return hmac.compare_digest(given, base64.b64encode(digest).decode())

    def respond(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, Any] | None]:
        now = time.time()
        body = json.loads(raw or b"{}")
        behaviour = self.next_behaviour()
        scripted = self.scripted(
            behaviour,
            {"errcode": {"errcode": 130101, "errmsg": "send too fast, exceed 20 times per minute"}},
        )
        if scripted is not None:
            self.received.append(Received(now, body, False, behaviour))
            return scripted
        if not self.valid_signature(path):
            self.received.append(Received(now, body, False, "sign"))
            return 200, {"errcode": 310000, "errmsg": "sign not match"}
        limits = [(self.limit_per_minute, 60.0)]
        if not self.admit(now, limits, Received(now, body, True), Received(now, body, False, "rate")):
            return 200, {"errcode": 130101, "errmsg": "send too fast, exceed 20 times per minute"}
        return 200, {"errcode": 0, "errmsg": "ok"}

    @property
    def accepted(self) -> list[Received]:
        return [r for r in self.received if r.accepted]
