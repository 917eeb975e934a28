"""The scaffold the fake peers share: a threaded HTTP(S) server (127.0.0.1 unless told otherwise) that hands
each POST to `respond()`.

A subclass decides the answer (and `answer_headers()` extra headers); status 0 means "hang" (no answer until
stop() or `hang_s`). A hook given to `before_next_answer()` runs once, in the server's thread, after the
request was handled and before the answer.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class FakeServer:
    url_path = "/"
    hang_s: float = 30.0
    script: list[str]  # behaviours for the next requests; "ok" once it is empty
    received: list[Any]  # what came in, each with `at` (time.time()) and `accepted`
    _hooks: list[Callable[[], None]]

    def respond(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, Any] | None]:
        raise NotImplementedError

    def answer_headers(self, status: int) -> dict[str, str]:
        return {}

    def start(self, host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None) -> Self:
        """Listen on `host`:`port` (a free port by default), over TLS with `tls`'s certificate if given."""
        fake = self
        self._host, self._tls = host, tls
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._hooks = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, answer = fake.respond(self.path, headers, raw)
                fake._run_hook()
                if status == 0:
                    fake._release.wait(fake.hang_s)
                    return  # hung: the client gave up
                payload = b"" if answer is None else json.dumps(answer).encode()
                self.send_response(status)
                if answer is not None:
                    self.send_header("content-type", "application/json; charset=utf-8")
                for name, value in fake.answer_headers(status).items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def before_next_answer(self, hook: Callable[[], None]) -> None:
        """Run `hook` once, after the next request is handled and before it is answered (e.g. take the
        database down between a peer's acceptance and our record of it)."""
        with self._lock:
            self._hooks.append(hook)

    def _run_hook(self) -> None:
        with self._lock:
            hook = self._hooks.pop(0) if self._hooks else None
        if hook is not None:
            hook()

    def next_behaviour(self) -> str:
        with self._lock:
            return self.script.pop(0) if self.script else "ok"

    @staticmethod
    def scripted(
        behaviour: str, refusals: dict[str, dict[str, Any]]
    ) -> tuple[int, dict[str, Any] | None] | None:
        """The answer a scripted behaviour asks for: "hang" (no answer), "http500", or one of the robot's own
        `refusals` (HTTP 200 with that body); None for "ok"."""
        if behaviour == "hang":
            return 0, None
        if behaviour == "http500":
            return 500, {"error": "internal"}
        return (200, refusals[behaviour]) if behaviour in refusals else None

    def admit(self, now: float, limits: Sequence[tuple[int, float]], accepted: Any, refused: Any) -> bool:
        """A robot's rate limits: whether a message at `now` keeps every (count, window_s) limit over the
        messages accepted so far; records `accepted` or `refused` in the same locked step."""
        with self._lock:
            times = [r.at for r in self.received if r.accepted]
            ok = all(sum(1 for t in times if now - t < window_s) < count for count, window_s in limits)
            self.received.append(accepted if ok else refused)
        return ok

    def max_in_window(self, window_s: float) -> int:
        """The most messages accepted within any `window_s` (what a robot's limit is checked against)."""
        times = sorted(r.at for r in self.received if r.accepted)
        return max((sum(1 for t in times if s <= t < s + window_s) for s in times), default=0)

    def stop(self) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://{self._host}:{self.port}{self.url_path}"
