"""A real local HTTP server receiving completion callbacks; it verifies `X-Report-Signature`.

Scriptable: answer HTTP 500 or hang for the next requests, then 200.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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
class Receiver:
    secret: str = SECRET
    script: list[str] = field(default_factory=list)  # http500 | hang
    received: list[Delivery] = field(default_factory=list)

    def start(self) -> Receiver:
        receiver = self
        self._release = threading.Event()
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                with receiver._lock:
                    behaviour = receiver.script.pop(0) if receiver.script else "ok"
                status = {"ok": 200, "http500": 500, "hang": 0}[behaviour]
                receiver.received.append(
                    Delivery(
                        time.time(),
                        json.loads(raw),
                        {k.lower(): v for k, v in self.headers.items()},
                        verify(receiver.secret, self.headers.get("X-Report-Signature", ""), raw),
                        status,
                    )
                )
                if behaviour == "hang":
                    receiver._release.wait(30)
                    return
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

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
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/report-done"

    @property
    def accepted(self) -> list[Delivery]:
        return [d for d in self.received if d.answered == 200 and d.signature_ok]
