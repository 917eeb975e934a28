"""Fallback load generator when wrk is missing: N keep-alive HTTP/1.1 connections POSTing for D seconds.

Raw asyncio streams, not httpx (httpx tops out near 700 req/s per core here); prints a JSON summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any
from urllib.parse import urlsplit


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]


async def read_response(reader: asyncio.StreamReader) -> int:
    """Read one response (Content-Length or chunked body); return its status code."""
    return (await read_response_body(reader))[0]


async def read_response_body(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Read one response (Content-Length or chunked body); return its status code and body."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length: int | None = None
    chunked = False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value.strip())
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    body = b""
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
            body += (await reader.readexactly(size + 2))[:size]
            if size == 0:
                break
    elif length:
        body = await reader.readexactly(length)
    return status, body


class RawPoster:
    """POSTs on one keep-alive connection with the request bytes built beforehand, so a clock read just before
    `post` times the server, not an HTTP client's own work (httpx spent ~1 ms before the bytes left)."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.headers = {"Host": f"{self.host}:{self.port}", "Content-Type": "application/json", **headers}
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    def request(self, path: str, body: bytes) -> bytes:
        head = [f"POST {path} HTTP/1.1", f"Content-Length: {len(body)}"]
        head += [f"{name}: {value}" for name, value in self.headers.items()]
        return ("\r\n".join(head) + "\r\n\r\n").encode() + body

    async def connect(self) -> None:
        if self._stream is None:
            self._stream = await asyncio.open_connection(self.host, self.port)

    async def post(self, request: bytes) -> tuple[int, bytes]:
        """Send a `request()` on the open connection and read its answer."""
        assert self._stream is not None, "connect() first"
        reader, writer = self._stream
        writer.write(request)
        return await read_response_body(reader)

    def close(self) -> None:
        if self._stream is not None:
            self._stream[1].close()
            self._stream = None


async def run(
    url: str, duration_s: float, concurrency: int, body: bytes, headers: dict[str, str]
) -> dict[str, Any]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    head = [f"POST {parts.path or '/'} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    request = ("\r\n".join(head) + "\r\n\r\n").encode() + body
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    errors = 0
    deadline = time.perf_counter() + duration_s

    async def one_client() -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while time.perf_counter() < deadline:
                began = time.perf_counter()
                writer.write(request)
                try:
                    status = await read_response(reader)
                except (asyncio.IncompleteReadError, ConnectionError, ValueError):
                    errors += 1
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, port)
                    continue
                latencies.append(time.perf_counter() - began)
                statuses[status] = statuses.get(status, 0) + 1
        finally:
            writer.close()

    began = time.perf_counter()
    await asyncio.gather(*(one_client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - began
    latencies.sort()
    ok = sum(n for code, n in statuses.items() if 200 <= code < 300)
    return {
        "tool": "asyncio",
        "duration_s": elapsed,
        "requests": len(latencies),
        "ok": ok,
        "errors": errors,
        "statuses": {str(k): v for k, v in statuses.items()},
        "rps": len(latencies) / elapsed,
        "ok_rps": ok / elapsed,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p90_ms": percentile(latencies, 90) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--body", default="{}")
    parser.add_argument("--header", action="append", default=[])
    args = parser.parse_args()
    headers = {"Content-Type": "application/json"}
    for item in args.header:
        name, _, value = item.partition(":")
        headers[name.strip()] = value.strip()
    coro = run(args.url, args.duration, args.concurrency, args.body.encode(), headers)
    try:
        import uvloop

        summary = uvloop.run(coro)
    except ImportError:
        summary = asyncio.run(coro)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
