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
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length:
        await reader.readexactly(length)
    return status


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
