"""A real local HTTP server receiving generic alert webhooks; it verifies `X-Report-Signature`.

The signature is the completion-callback scheme (`t=<unix>,v1=<hex HMAC-SHA256 of "<t>." + body>`), checked
with `tests.fakes.receiver.verify`. Scriptable: answer HTTP 500, HTTP 400 or hang for the next requests;
otherwise 204 (any 2xx counts as accepted).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.receiver import verify

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
class FakeWebhook:
    secret: str = SECRET
    script: list[str] = field(default_factory=list)  # http500 | http400 | hang
    received: list[Received] = field(default_factory=list)
    hang_s: float = 30.0

    def start(self) -> FakeWebhook:
        fake = self
        self._release = threading.Event()
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                with fake._lock:
                    behaviour = fake.script.pop(0) if fake.script else "ok"
                headers = {k.lower(): v for k, v in self.headers.items()}
                signature_ok = verify(fake.secret, headers.get("x-report-signature", ""), raw)
                status = {"ok": 204, "http500": 500, "http400": 400, "hang": 0}[behaviour]
                if behaviour == "ok" and not signature_ok:
                    status = 401
                fake.received.append(Received(time.time(), json.loads(raw), headers, signature_ok, status))
                if behaviour == "hang":
                    fake._release.wait(fake.hang_s)
                    return
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/report-alerts"

    @property
    def accepted(self) -> list[Received]:
        return [r for r in self.received if r.accepted]

    def max_in_window(self, window_s: float) -> int:
        times = sorted(r.at for r in self.accepted)
        return max((sum(1 for t in times if s <= t < s + window_s) for s in times), default=0)
