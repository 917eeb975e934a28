"""A fake of a team's report service on 127.0.0.1, called by our HTTP report types: it checks our request's
signature (`X-Report-Signature`, as a PHP service would) and answers as scripted.

Behaviours, one per request (then "file"): "file" (200 with a CSV, its name and row count in the headers),
"accept" (202: the test reports back through the request's callback URLs), "http500", "http404", "http429".
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from tests.utils.fakes.receiver import verify

SECRET = "report-service-secret-0123456789"
CSV = b"region,amount\nnorth,10\nsouth,20\n"


@dataclass
class ServiceCall:
    method: str
    path: str
    headers: dict[str, str]
    envelope: dict[str, Any]
    signature_ok: bool
    answered: int

    @property
    def callback(self) -> dict[str, Any]:
        return dict(self.envelope["callback"])


@dataclass
class FakeReportService:
    secret: str = SECRET
    script: list[str] = field(default_factory=list)
    calls: list[ServiceCall] = field(default_factory=list)

    def start(self) -> Self:
        fake = self
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                split = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(split.query))
                envelope: dict[str, Any] = {**query, "params": json.loads(query.get("params", "{}"))}
                fake.handle(self, "GET", split.query.encode(), envelope)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                fake.handle(self, "POST", raw, json.loads(raw or b"{}"))

            do_PUT = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def handle(
        self, handler: BaseHTTPRequestHandler, method: str, signed: bytes, envelope: dict[str, Any]
    ) -> None:
        headers = {k.lower(): v for k, v in handler.headers.items()}
        ok = verify(self.secret, headers.get("x-report-signature", ""), signed)  # as a receiver checks
        with self._lock:
            behaviour = self.script.pop(0) if self.script else "file"
        status = {"file": 200, "accept": 202, "http500": 500, "http404": 404, "http429": 429}[behaviour]
        if not ok:
            status, behaviour = 401, "unsigned"
        with self._lock:
            self.calls.append(ServiceCall(method, handler.path, headers, envelope, ok, status))
        body = CSV if behaviour == "file" else json.dumps({"status": behaviour}).encode()
        handler.send_response(status)
        if behaviour == "file":
            region = str(envelope.get("params", {}).get("region", "all")).replace("/", "-")
            handler.send_header("Content-Type", "text/csv; charset=utf-8")
            handler.send_header("Content-Disposition", f'attachment; filename="sales-{region}.csv"')
            handler.send_header("X-Report-Rows", "2")
        else:
            handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    async def calls_made(self, count: int, within_s: float = 20.0) -> list[ServiceCall]:
        """Wait (without blocking the loop: a worker may run in it) until `count` calls came in."""
        deadline = time.monotonic() + within_s
        while len(self.calls) < count:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the service got {len(self.calls)} calls, not {count}, in {within_s:g} s"
                )
            await asyncio.sleep(0.02)
        return list(self.calls)
