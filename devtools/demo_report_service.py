"""The tiny report service `make run` starts for the demo HTTP report types: it checks our signature, then
answers a CSV of made-up sales (`/reports/sales/{region}`, synchronous) or accepts the job (202) and later
heartbeats, reports progress and uploads the CSV to the attempt's callback URLs (`/reports/sales-async/…`).

`python -m devtools.demo_report_service --port 8099`; the secret is DEMO_REPORT_SERVICE_SECRET.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

DEFAULT_PORT = 8099
DEV_SECRET = "dev-demo-report-service-secret"
ASYNC_STEPS = 4
STEP_S = 1.0


def secret() -> str:
    return os.environ.get("DEMO_REPORT_SERVICE_SECRET") or DEV_SECRET


def signature_ok(header: str, body: bytes, tolerance_s: float = 300) -> bool:
    """What every team's service does (see docs/how-to/http-reports.md): HMAC-SHA256 of "<t>." + body."""
    parts = dict(item.split("=", 1) for item in header.split(",") if "=" in item)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - timestamp) > tolerance_s:
        return False
    expected = hmac.new(secret().encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts.get("v1", ""))


def sales_csv(region: str, rows: int) -> bytes:
    rng = random.Random(f"{region}-{rows}")
    lines = ["date,region,orders,amount"]
    lines += [
        f"2026-11-{1 + n % 28:02d},{region},{rng.randint(1, 90)},{rng.randint(100, 9000)}.00"
        for n in range(rows)
    ]
    return ("\n".join(lines) + "\n").encode()


def _say(text: str) -> None:
    print(text, flush=True)


def run_async(envelope: dict[str, Any], region: str, rows: int) -> None:
    """Work on an accepted job: heartbeat with progress each step (stop on `cancel`), then upload."""
    callback = envelope["callback"]
    job = envelope["job_id"]
    with httpx.Client(timeout=10.0, trust_env=False) as client:
        for step in range(1, ASYNC_STEPS + 1):
            time.sleep(STEP_S)
            answer = client.post(callback["progress_url"], json={"progress": step / (ASYNC_STEPS + 1)})
            if answer.status_code != 200 or answer.json().get("cancel"):
                _say(f"job {job}: stopping ({answer.status_code} {answer.text[:100]})")
                return
        answer = client.post(
            callback["complete_url"],
            params={"filename": f"sales-{region}.csv", "rows": rows},
            content=sales_csv(region, rows),
            headers={"Content-Type": "text/csv"},
        )
        _say(f"job {job}: uploaded, {answer.status_code}")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        _say(f"{self.command} {self.path.split('?')[0]} {args[1] if len(args) > 1 else ''}")

    def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in {**headers, "Content-Length": str(len(body))}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if not signature_ok(self.headers.get("x-report-signature", ""), body):
            self._answer(401, b'{"error":"bad signature"}', {"Content-Type": "application/json"})
            return
        envelope = json.loads(body)
        params = envelope.get("params", {})
        region = self.path.rstrip("/").rsplit("/", 1)[-1]
        rows = max(0, min(int(params.get("rows", 100)), 100_000))
        if self.path.startswith("/reports/sales/"):
            headers = {
                "Content-Type": "text/csv; charset=utf-8",
                "Content-Disposition": f'attachment; filename="sales-{region}.csv"',
                "X-Report-Rows": str(rows),
            }
            self._answer(200, sales_csv(region, rows), headers)
        elif self.path.startswith("/reports/sales-async/") and "callback" in envelope:
            threading.Thread(target=run_async, args=(envelope, region, rows), daemon=True).start()
            self._answer(202, b'{"accepted":true}', {"Content-Type": "application/json"})
        else:
            self._answer(404, b'{"error":"no such report"}', {"Content-Type": "application/json"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    _say(f"demo report service listening on http://{args.host}:{args.port}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
