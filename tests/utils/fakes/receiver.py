"""A real local HTTP server receiving completion callbacks; it verifies `X-Report-Signature`.

Scriptable: answer HTTP 500, hang, or redirect (307 to `redirect_to`) for the next requests, then 200.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import Any

from tests.utils.fakes.server import FakeServer

SECRET = "cb-test-secret-0123456789"


@dataclass
class Delivery:
    at: float
    body: dict[str, Any]
    headers: dict[str, str]
    signature_ok: bool
    answered: int


def verify(secret: str, header: str, body: bytes, tolerance_s: float = 300) -> bool:
    """What a receiver does: recompute HMAC-SHA256 over "<t>.<body>" and compare in constant time."""
    parts = dict(item.split("=", 1) for item in header.split(",") if "=" in item)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - timestamp) > tolerance_s:
        return False
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts.get("v1", ""))


@dataclass
class Receiver(FakeServer):
    url_path = "/hooks/report-done"
    secret: str = SECRET
    script: list[str] = field(default_factory=list)  # http500 | hang | redirect
    received: list[Delivery] = field(default_factory=list)
    redirect_to: str = ""

    def respond(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, Any] | None]:
        behaviour = self.next_behaviour()
        status = {"ok": 200, "http500": 500, "hang": 0, "redirect": 307}[behaviour]
        ok = verify(self.secret, headers.get("x-report-signature", ""), raw)
        self.received.append(Delivery(time.time(), json.loads(raw), headers, ok, status))
        return status, {}

    def answer_headers(self, status: int) -> dict[str, str]:
        return {"Location": self.redirect_to} if status == 307 else {}

    @property
    def accepted(self) -> list[Delivery]:
        return [d for d in self.received if d.answered == 200 and d.signature_ok]
