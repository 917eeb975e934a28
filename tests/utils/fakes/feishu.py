"""A real local HTTP server that behaves like a Feishu (Lark) custom bot, for alert tests.

Checks the body signature like Feishu does (`timestamp` in seconds within an hour, `sign` =
base64(HMAC-SHA256(key="<timestamp>\\n<secret>", msg=b""))), enforces 5 messages a second and 100 a minute,
and can be told to answer `code` 9499, an old-style `StatusCode` 1, HTTP 500, or hang for the next requests.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import Any

from tests.utils.fakes.server import FakeServer

SECRET = "feishu-test-secret-Qm9vdHN0cmFw"


@dataclass
class Received:
    at: float
    body: dict[str, Any]
    accepted: bool
    reason: str = ""

    @property
    def title(self) -> str:
        return str(self.body.get("card", {}).get("header", {}).get("title", {}).get("content", ""))

    @property
    def text(self) -> str:
        """The card's title and markdown content, where job ids appear."""
        elements = self.body.get("card", {}).get("elements", [])
        return "\n".join([self.title, *(str(e.get("content", "")) for e in elements)])


def expected_sign(secret: str, timestamp: int) -> str:
    digest = hmac.new(f"{timestamp}\n{secret}".encode(), b"", hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


@dataclass
class FakeFeishu(FakeServer):
    url_path = "/open-apis/bot/v2/hook/test-hook-id"
    secret: str = SECRET
    limit_per_minute: int = 100
    limit_per_second: int = 5
    # Behaviours for the next requests: code | statuscode | http500 | hang.
    script: list[str] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    hang_s: float = 30.0

    def valid_signature(self, body: dict[str, Any]) -> bool:
        try:
            timestamp = int(body["timestamp"])
            given = str(body["sign"])
        except (KeyError, ValueError, TypeError):
            return False
        if abs(time.time() - timestamp) > 3600:
            return False
        return hmac.compare_digest(given, expected_sign(self.secret, timestamp))

    @staticmethod
    def well_formed(body: dict[str, Any]) -> bool:
        card = body.get("card")
        return (
            body.get("msg_type") == "interactive"
            and isinstance(card, dict)
            and isinstance(card.get("header", {}).get("title", {}).get("content"), str)
            and all(isinstance(e.get("tag"), str) for e in card.get("elements", []))
        )

    def respond(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, Any] | None]:
        now = time.time()
        body = json.loads(raw or b"{}")
        behaviour = self.next_behaviour()
        scripted = self.scripted(
            behaviour,
            {
                "code": {"code": 9499, "msg": "Bad Request", "data": {}},
                "statuscode": {"StatusCode": 1, "StatusMessage": "failed"},
            },
        )
        if scripted is not None:
            self.received.append(Received(now, body, False, behaviour))
            return scripted
        if not self.valid_signature(body):
            self.received.append(Received(now, body, False, "sign"))
            return 200, {
                "code": 19021,
                "msg": "sign match fail or timestamp is not within one hour from current time",
                "data": {},
            }
        if not self.well_formed(body):
            self.received.append(Received(now, body, False, "format"))
            return 200, {"code": 9499, "msg": "Bad Request", "data": {}}
        limits = [(self.limit_per_second, 1.0), (self.limit_per_minute, 60.0)]
        if not self.admit(now, limits, Received(now, body, True), Received(now, body, False, "rate")):
            return 200, {"code": 11232, "msg": "frequency limited", "data": {}}
        return 200, {"StatusCode": 0, "StatusMessage": "success", "code": 0, "data": {}, "msg": "success"}

    @property
    def accepted(self) -> list[Received]:
        return [r for r in self.received if r.accepted]
