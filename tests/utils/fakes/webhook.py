"""A real local HTTP server receiving generic alert webhooks; it verifies `X-Report-Signature`.

The signature is the completion-callback scheme (`t=<unix>,v1=<hex HMAC-SHA256 of "<t>." + body>`), checked
with `tests.utils.fakes.receiver.verify`. Scriptable: answer HTTP 500, HTTP 400 or hang for the next requests;
otherwise 204 (any 2xx counts as accepted).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from tests.utils.fakes.receiver import verify
from tests.utils.fakes.server import FakeServer

SECRET = "alert-webhook-test-secret-0123456789"


@dataclass
class Received:
    at: float
    body: dict[str, Any]
    headers: dict[str, str]
    signature_ok: bool
    answered: int

    @property
    def accepted(self) -> bool:
        return self.signature_ok and 200 <= self.answered < 300

    @property
    def text(self) -> str:
        return f"{self.body.get('title', '')}\n{self.body.get('markdown', '')}"


@dataclass
class FakeWebhook(FakeServer):
    url_path = "/hooks/report-alerts"
    secret: str = SECRET
    script: list[str] = field(default_factory=list)  # http500 | http400 | hang
    received: list[Received] = field(default_factory=list)
    hang_s: float = 30.0

    def respond(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, Any] | None]:
        behaviour = self.next_behaviour()
        signature_ok = verify(self.secret, headers.get("x-report-signature", ""), raw)
        status = {"ok": 204, "http500": 500, "http400": 400, "hang": 0}[behaviour]
        if behaviour == "ok" and not signature_ok:
            status = 401
        self.received.append(Received(time.time(), json.loads(raw), headers, signature_ok, status))
        return status, None

    @property
    def accepted(self) -> list[Received]:
        return [r for r in self.received if r.accepted]
