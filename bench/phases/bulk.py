"""Bulk submit phase: POST /v1/jobs/batch with batches of 500 no-op jobs from several concurrent clients for a
fixed time, no worker running; rate = jobs created ÷ the wall time from the first request sent to the last
answer, then checked against the rows in MySQL and the entries of the arq queue in Redis.

Skipped, with a note in the report, while the API has no such endpoint (404 or 405)."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from typing import Any

from bench.common import BULK_BATCH, BULK_CLIENTS, BULK_SECONDS, JOB_BODY, WARMUP_SECONDS, log, pct
from bench.context import Bench
from bench.procs import CpuMeter

PATH = "/v1/jobs/batch"
REQUEST_TIMEOUT_S = 60.0
QUEUE_SETTLE_S = 5.0  # should the enqueue ever trail the answer: how long the queue may take to catch up


def batch_body(size: int) -> bytes:
    return ('{"jobs":[' + ",".join([JOB_BODY] * size) + "]}").encode()


async def probe(client: Any) -> str | None:
    """None when the endpoint takes a one-item batch as agreed (207, one result, 202); else why not."""
    resp = await client.post(PATH, content=batch_body(1))
    if resp.status_code in (404, 405):
        return f"endpoint not available ({resp.status_code})"
    if resp.status_code != 207:
        return f"{PATH} answered {resp.status_code} to a one-item batch: {resp.text[:300]}"
    doc = resp.json()
    results = doc.get("results") or []
    if doc.get("created") != 1 or len(results) != 1 or results[0].get("status") != 202:
        return f"{PATH} answered an unexpected 207 body to a one-item batch: {resp.text[:300]}"
    return None


class Tally:
    def __init__(self) -> None:
        self.created = self.existing = self.rejected = self.requests = 0
        self.http_statuses: Counter[int] = Counter()
        self.item_statuses: Counter[int] = Counter()
        self.latencies_ms: list[float] = []
        self.last_answer = 0.0

    def add(self, status: int, doc: dict[str, Any] | None, elapsed_s: float) -> None:
        self.requests += 1
        self.http_statuses[status] += 1
        self.last_answer = time.perf_counter()
        if doc is None:
            return
        self.latencies_ms.append(elapsed_s * 1000)
        self.created += int(doc["created"])
        self.existing += int(doc["existing"])
        self.rejected += int(doc["rejected"])
        self.item_statuses.update(int(r["status"]) for r in doc["results"])


async def load(client: Any, seconds: float, body: bytes) -> tuple[Tally, float, float]:
    """BULK_CLIENTS concurrent clients, each posting `body` back to back until `seconds` have passed; the
    tally, and the moments the first request was sent and the last answer arrived."""
    tally = Tally()
    began = time.perf_counter()
    deadline = began + seconds

    async def one_client() -> None:
        while time.perf_counter() < deadline:
            sent = time.perf_counter()
            resp = await client.post(PATH, content=body)
            doc = json.loads(resp.content) if resp.status_code == 207 else None
            tally.add(resp.status_code, doc, time.perf_counter() - sent)

    await asyncio.gather(*(one_client() for _ in range(BULK_CLIENTS)))
    return tally, began, tally.last_answer


async def count_queued(bench: Bench, expected: int) -> tuple[int, float]:
    """The arq queue's size once it reaches `expected` (or QUEUE_SETTLE_S passed), and how long it had to be
    waited for (0 when it was already there at the first look)."""
    from app.core.config import get_settings

    queue_name = get_settings().queue_name
    began = time.perf_counter()
    waited = 0.0
    while True:
        queued = int(await bench.rds.zcard(queue_name))
        if queued >= expected or waited > QUEUE_SETTLE_S:
            return queued, waited
        await asyncio.sleep(0.02)
        waited = time.perf_counter() - began


async def run(bench: Bench) -> None:
    import httpx

    assert bench.api is not None, "start_api() first"
    log(f"bulk: POST {PATH}, {BULK_BATCH} jobs a request, {BULK_CLIENTS} clients, {BULK_SECONDS:g} s")
    headers = {"Authorization": f"Bearer {bench.api_key}", "Content-Type": "application/json"}
    limits = httpx.Limits(max_connections=BULK_CLIENTS, max_keepalive_connections=BULK_CLIENTS)
    body = batch_body(BULK_BATCH)
    out: dict[str, Any] = {
        "batch": BULK_BATCH, "clients": BULK_CLIENTS, "seconds": BULK_SECONDS, "body_bytes": len(body),
    }  # fmt: skip
    await bench.clean()
    async with httpx.AsyncClient(
        base_url=bench.base_url, headers=headers, timeout=REQUEST_TIMEOUT_S, limits=limits
    ) as client:
        skipped = await probe(client)
        if skipped:
            log(f"  skipped: {skipped}")
            bench.results["bulk"] = dict(out, skipped=skipped)
            return
        await load(client, WARMUP_SECONDS, body)
        await bench.clean()
        status = await bench.mysql_status()
        cpu = CpuMeter({"api": bench.api.pid, **bench.server_pids()}).start()
        tally, first_sent, last_answer = await load(client, BULK_SECONDS, body)
        out["cpu_pct"] = cpu.stop()
    created = tally.created
    out["mysql_per_job"] = await bench.per_job_statements(status, max(1, created), 0)
    rows = int(await bench.scalar("SELECT COUNT(*) FROM report_jobs") or 0)
    queued, queue_lag_s = await count_queued(bench, created)
    # Persisted and enqueued: should the queue trail the answers, the wait for it counts as wall time.
    wall_s = last_answer - first_sent + queue_lag_s
    out.update(
        requests=tally.requests,
        http_statuses={str(k): v for k, v in sorted(tally.http_statuses.items())},
        item_statuses={str(k): v for k, v in sorted(tally.item_statuses.items())},
        created=created,
        existing=tally.existing,
        rejected=tally.rejected,
        rows_in_mysql=rows,
        queued_in_redis=queued,
        queue_lag_s=round(queue_lag_s, 3),
        verified=rows == created and queued == created and created > 0,
        wall_s=round(wall_s, 3),
        jobs_per_s=created / wall_s if wall_s > 0 else 0.0,
        batch_p50_ms=pct(tally.latencies_ms, 50),
        batch_p99_ms=pct(tally.latencies_ms, 99),
    )
    bench.results["bulk"] = out
    log(f"  {created:,} jobs created in {wall_s:.1f} s: {out['jobs_per_s']:,.0f} jobs/s; MySQL rows "
        f"{rows:,}, arq queue {queued:,}{'' if out['verified'] else ' — MISMATCH'}; batch p50 "
        f"{out['batch_p50_ms']:.0f} ms, p99 {out['batch_p99_ms']:.0f} ms; "
        f"HTTP {out['http_statuses']}")  # fmt: skip
