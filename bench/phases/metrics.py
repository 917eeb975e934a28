"""Metrics phase (issue 12): what the Prometheus metrics cost.

(a) Submit and (b) drain throughput with METRICS_ENABLED=true and =false, interleaved in one run (on, off,
off, on, on, off …) so drift hits both sides alike; the "on" side is scraped every 5 s as Prometheus would
(the API's /metrics, and for the drain the worker's METRICS_PORT too). (c) The cost of one scrape of the API's
/metrics with 1,000,000 rows in report_jobs (filled in bulk SQL), uncached (METRICS_CACHE_S=0) and cached,
plus the state query round alone and EXPLAIN of each of its queries.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.common import SCALE, WARMUP_SECONDS, log, pct
from bench.context import ApiServer, Bench
from bench.phases import drain, submit

PAIRS = 3
SUBMIT_SECONDS = float(max(2, math.ceil(5 * min(SCALE, 1.0))))  # whole seconds: wrk's -d takes no fraction
DRAIN_JOBS = max(200, round(3_000 * SCALE))
DRAIN_WORKERS = 1  # one worker process: its CPU per job is what the counters add to
SCRAPE_EVERY_S = 5.0  # Prometheus's scrape interval during the throughput runs
TARGET_PCT = 3.0  # issue 12: metrics on costs at most 3 % of the throughput
SCRAPE_TARGET_MS = 50.0  # issue 12: one scrape of the API's /metrics with 1,000,000 job rows
SCRAPE_TARGET_ROWS = 1_000_000
FILL_ROWS = max(10_000, round(SCRAPE_TARGET_ROWS * SCALE))
LIVE_ROWS = max(200, round(4_000 * SCALE))  # pending, scheduled, retrying, running: the newest rows
FILL_CHUNK = 100_000  # rows per INSERT … SELECT (one transaction each: undo and redo stay small)
FILL_DAYS = 30  # created_at spread over the last 30 days
SCRAPES = max(50, round(200 * min(SCALE, 1.0)))
STATE_ROUNDS = max(20, round(50 * min(SCALE, 1.0)))
SCRAPE_TIMEOUT_S = 10.0
OFF = {"METRICS_ENABLED": "false", "METRICS_PORT": "0"}

TENANTS = 20
REPORT_TYPES = (
    "sales.daily", "sales.monthly", "ledger.full", "ledger.delta", "inventory.snapshot", "payroll.run",
    "tax.vat", "export.csv",
)  # fmt: skip
# Live rows by status, one in ten each: 40 % pending, 30 % scheduled, 20 % retrying, 10 % running.
LIVE_MIX = ("pending",) * 4 + ("scheduled",) * 3 + ("retrying",) * 2 + ("running",)


# ---- throughput, on vs off ----------------------------------------------------------------------------


def order() -> list[str]:
    """on, off, off, on, on, off …: each side goes first in every other pair (linear drift cancels)."""
    sides: list[str] = []
    for i in range(PAIRS):
        sides += ["on", "off"] if i % 2 == 0 else ["off", "on"]
    return sides


@contextlib.asynccontextmanager
async def scraping(urls: Sequence[str]) -> AsyncIterator[dict[str, Any]]:
    """Prometheus's part while the body runs: GET each of `urls` every SCRAPE_EVERY_S, from the start.

    Yields {url: {"ok_ms": [...], "failed": n, "last": body}}; failures before a target's first answer (a
    worker still starting) are not counted."""
    import httpx

    seen: dict[str, Any] = {url: {"ok_ms": [], "failed": 0, "last": ""} for url in urls}

    async def loop(client: httpx.AsyncClient) -> None:
        while True:
            for url in urls:
                began = time.perf_counter()
                try:
                    resp = await client.get(url)
                    resp.raise_for_status()
                except httpx.HTTPError:
                    if seen[url]["ok_ms"]:
                        seen[url]["failed"] += 1
                    continue
                seen[url]["ok_ms"].append(round((time.perf_counter() - began) * 1000, 2))
                seen[url]["last"] = resp.text
            await asyncio.sleep(SCRAPE_EVERY_S)

    async with httpx.AsyncClient(timeout=SCRAPE_TIMEOUT_S) as client:
        task = asyncio.create_task(loop(client)) if urls else None
        try:
            yield seen
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


def family_total(body: str, name: str, **labels: str) -> float:
    """The sum of the samples of metric `name` (e.g. reports_jobs_submitted_total) matching `labels`."""
    total = 0.0
    for line in body.splitlines():
        if not line.startswith(name) or line[len(name) : len(name) + 1] not in ("{", " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def scrape_summary(seen: dict[str, Any], family: str, **labels: str) -> dict[str, Any]:
    """Per target: scrapes that worked, their latency, and what the last one counted of `family`."""
    out: dict[str, Any] = {}
    for url, got in seen.items():
        out[url] = {
            "ok": len(got["ok_ms"]),
            "failed": got["failed"],
            "max_ms": max(got["ok_ms"], default=None),
            f"last_{family}": family_total(got["last"], family, **labels) if got["last"] else None,
        }
    return out


async def submit_run(bench: Bench, api: ApiServer, side: str) -> dict[str, Any]:
    await bench.clean()
    urls = [f"{api.base_url}/metrics"] if side == "on" else []
    async with scraping(urls) as seen:
        fig = await submit.load(bench, "/v1/jobs", SUBMIT_SECONDS, api)
    fig["side"] = side
    fig["scrapes"] = scrape_summary(seen, "reports_jobs_submitted_total")
    return fig


async def drain_run(bench: Bench, api: ApiServer, side: str) -> dict[str, Any]:
    from devtools.servers import free_port

    if side == "on":
        port = free_port()
        env = {"METRICS_ENABLED": "true", "METRICS_PORT": str(port)}
        urls = [f"http://127.0.0.1:{port}/metrics", f"{api.base_url}/metrics"]
    else:
        env, urls = dict(OFF), []
    async with scraping(urls) as seen:
        fig = await drain.drain_ours(bench, DRAIN_WORKERS, DRAIN_JOBS, f"metrics-{side}-", **env)
    fig["side"] = side
    fig["scrapes"] = scrape_summary(seen, "reports_attempts_finished_total", outcome="succeeded")
    return fig


def compare(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """Medians of `key` on and off, their ratio and difference, the ratio within each pair, and the spread
    between repeats. Noisy when either side's spread, (max − min) ÷ median, exceeds the 3 % to resolve."""
    on = [r[key] for r in runs if r["side"] == "on"]
    off = [r[key] for r in runs if r["side"] == "off"]
    med_on, med_off = statistics.median(on), statistics.median(off)
    spread_on = 100.0 * (max(on) - min(on)) / med_on
    spread_off = 100.0 * (max(off) - min(off)) / med_off
    pair_ratios = [
        a[key] / b[key] if a["side"] == "on" else b[key] / a[key]
        for a, b in zip(runs[::2], runs[1::2], strict=True)
    ]
    ratio = med_on / med_off
    spread = max(spread_on, spread_off)
    return {
        "on": [round(v, 3) for v in on],
        "off": [round(v, 3) for v in off],
        "median_on": round(med_on, 3),
        "median_off": round(med_off, 3),
        "ratio_on_off": round(ratio, 4),
        "diff_pct": round(100.0 * (ratio - 1.0), 2),
        "spread_on_pct": round(spread_on, 2),
        "spread_off_pct": round(spread_off, 2),
        "spread_pct": round(spread, 2),
        "pair_ratios": [round(r, 4) for r in pair_ratios],
        "median_pair_ratio": round(statistics.median(pair_ratios), 4),
        "noisy": spread > TARGET_PCT,
        "inside_noise": abs(100.0 * (ratio - 1.0)) <= spread,
    }


def app_cpu_ms_per_job(fig: dict[str, Any], rate: float) -> float:
    """CPU milliseconds per job of the process under test (the API, or the worker): less sensitive than the
    rate to other load on the machine, which takes cores from it but does not add to its CPU time."""
    from bench.report import META_CPU_KEYS

    app_pct = sum(v for k, v in fig["cpu_pct"].items() if k not in META_CPU_KEYS)
    return 10.0 * app_pct / rate if rate else float("nan")


def side_figures(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The runs, the rate compared (met: at most 3 % lower with metrics on), and CPU per job compared."""
    for fig in runs:
        fig["app_cpu_ms_per_job"] = round(app_cpu_ms_per_job(fig, fig[key]), 3)
    rate = compare(runs, key)
    rate["met"] = rate["diff_pct"] >= -TARGET_PCT
    others = {side: [r["cpu_pct"]["others"] for r in runs if r["side"] == side] for side in ("on", "off")}
    return {
        "runs": runs,
        **rate,
        "cpu_ms_per_job": compare(runs, "app_cpu_ms_per_job"),
        "others_cpu_pct_median": {side: statistics.median(v) for side, v in others.items()},
    }


def describe(name: str, fig: dict[str, Any], unit: str) -> str:
    cpu = fig["cpu_ms_per_job"]
    verdict = (
        f"NOISY: repeats spread {fig['spread_pct']:.1f} % > the {TARGET_PCT:g} % to resolve"
        if fig["noisy"]
        else f"spread {fig['spread_pct']:.1f} %"
    )
    return (
        f"  {name}: on {fig['median_on']:,.0f} vs off {fig['median_off']:,.0f} {unit} (medians), "
        f"on/off {fig['ratio_on_off']:.3f} ({fig['diff_pct']:+.1f} %); {verdict}; CPU per job on "
        f"{cpu['median_on']:.2f} vs off {cpu['median_off']:.2f} ms ({cpu['diff_pct']:+.1f} %, spread "
        f"{cpu['spread_pct']:.1f} %)"
    )


async def throughput(bench: Bench) -> dict[str, Any]:
    sides = order()
    log(f"metrics: submit {SUBMIT_SECONDS:g} s and drain {DRAIN_JOBS} jobs, metrics on vs off, "
        f"{PAIRS} pairs in the order {', '.join(sides)}")  # fmt: skip
    import httpx

    api_on = await bench.launch_api("api-metrics-on", METRICS_ENABLED="true")
    try:
        api_off = await bench.launch_api("api-metrics-off", **OFF)
        try:
            apis = {"on": api_on, "off": api_off}
            for api in apis.values():
                await submit.load(bench, "/v1/jobs", WARMUP_SECONDS, api)
            submits: list[dict[str, Any]] = []
            for side in sides:
                submits.append(await submit_run(bench, apis[side], side))
                log(f"  submit, metrics {side}: {submits[-1]['ok_rps']:,.0f} accepted/s")
            async with httpx.AsyncClient(timeout=SCRAPE_TIMEOUT_S) as client:
                off_body = (await client.get(f"{api_off.base_url}/metrics")).text
        finally:
            api_off.proc.stop()
        drains: list[dict[str, Any]] = []
        for side in sides:  # the API with metrics on stays up: Prometheus scrapes it during the "on" drains
            drains.append(await drain_run(bench, api_on, side))
            log(f"  drain, metrics {side}: {drains[-1]['jobs_per_s']:,.0f} jobs/s")
    finally:
        api_on.proc.stop()
    out: dict[str, Any] = {
        "order": sides,
        "submit_seconds": SUBMIT_SECONDS,
        "drain_jobs": DRAIN_JOBS,
        "drain_workers": DRAIN_WORKERS,
        "scrape_every_s": SCRAPE_EVERY_S,
        "target_pct": TARGET_PCT,
        "submit": side_figures(submits, "ok_rps"),
        "drain": side_figures(drains, "jobs_per_s"),
        "off_api_counted_submits": family_total(off_body, "reports_jobs_submitted_total"),
    }
    log(describe("submit", out["submit"], "accepted/s"))
    log(describe("drain", out["drain"], "jobs/s"))
    return out


# ---- the scrape with a million job rows ---------------------------------------------------------------


def _ts(value: datetime) -> str:
    return f"TIMESTAMP'{value.strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def jobs_select(source: str, now: datetime) -> str:
    """SELECT of report_jobs rows for the numbers n of `source` (a table or derived table with column `seq`).

    The newest LIVE_ROWS rows are live; the rest is 1 % dead, 1 % cancelled, 98 % done. Tenants, report types
    and the optional columns come from a hash of n; created_at spreads over FILL_DAYS."""
    n_total, live_from = FILL_ROWS, FILL_ROWS - LIVE_ROWS
    step_us = FILL_DAYS * 86_400_000_000 // FILL_ROWS
    now_sql = _ts(now)
    mix = ", ".join(f"'{s}'" for s in LIVE_MIX)
    types = ", ".join(f"'{t}'" for t in REPORT_TYPES)
    return f"""
SELECT
  CONCAT('01BENCH', LPAD(n, 19, '0')), tenant, report_type,
  JSON_OBJECT('day', DATE(c), 'region', MOD(h, 7)), st,
  CASE st WHEN 'dead' THEN 4 WHEN 'retrying' THEN 1 + MOD(h, 2) WHEN 'cancelled' THEN 0 WHEN 'pending' THEN 0
    WHEN 'scheduled' THEN 0 ELSE 1 END,
  4, 300,
  IF(st = 'retrying', {now_sql} + INTERVAL (MOD(h, 120) - 30) SECOND, NULL),
  IF(st = 'scheduled', {now_sql} + INTERVAL (60 + MOD(h, 86400)) SECOND, NULL),
  okey, 'wait',
  IF(st = 'pending' AND okey IS NOT NULL AND MOD(n, 4) = 0, CONCAT('01BENCH', LPAD(n - 1, 19, '0')), NULL),
  cb,
  CASE WHEN cb IS NULL OR st NOT IN ('done', 'dead', 'cancelled') THEN NULL
    WHEN n > {live_from - LIVE_ROWS // 2} THEN 'pending' ELSE 'delivered' END,
  IF(cb IS NOT NULL AND st IN ('done', 'dead', 'cancelled'), 1, 0), NULL,
  CASE st WHEN 'done' THEN 1.0 WHEN 'running' THEN 0.5 ELSE NULL END,
  IF(st IN ('dead', 'retrying'), JSON_OBJECT('type', 'TimeoutError', 'message', 'upstream timed out'), NULL),
  IF(st = 'done', CONCAT('/var/reports/', tenant, '/', n, '.csv'), NULL),
  IF(st = 'done', CONCAT(report_type, '.csv'), NULL),
  IF(st = 'done', 'text/csv', NULL),
  IF(st = 'done', 1000 + MOD(h, 1000000), NULL),
  0,
  CASE st WHEN 'dead' THEN 4 WHEN 'retrying' THEN 1 + MOD(h, 2) WHEN 'cancelled' THEN 0 WHEN 'pending' THEN 0
    WHEN 'scheduled' THEN 0 ELSE 1 END,
  IF(MOD(h DIV 17, 3) = 0, CONCAT('idem-', n), NULL),
  IF(MOD(h DIV 17, 3) = 0, LPAD(HEX(h), 64, '0'), NULL),
  IF(st IN ('running', 'done', 'dead'), CONCAT('worker-', MOD(h, 4), '@bench-host'), NULL),
  IF(st = 'running', {now_sql} - INTERVAL MOD(h, 5) SECOND, NULL),
  0, NULL,
  c,
  IF(st IN ('running', 'done', 'dead'), c + INTERVAL MOD(h, 500000) MICROSECOND, NULL),
  fin,
  COALESCE(fin, IF(st = 'running', c + INTERVAL MOD(h, 500000) MICROSECOND, c))
FROM (
  SELECT n, h, c, st,
    CONCAT('tenant-', LPAD(MOD(h DIV 100, {TENANTS}), 2, '0')) AS tenant,
    ELT(1 + MOD(h DIV 2000, {len(REPORT_TYPES)}), {types}) AS report_type,
    IF(MOD(h DIV 7, 20) = 0, CONCAT('account-', MOD(h, 500)), NULL) AS okey,
    IF(MOD(h DIV 13, 20) = 0, 'https://hooks.example.com/reports', NULL) AS cb,
    IF(st IN ('done', 'dead', 'cancelled'), c + INTERVAL (1000000 + MOD(h, 30000000)) MICROSECOND, NULL)
      AS fin
  FROM (
    SELECT n, h, {now_sql} - INTERVAL (({n_total} - n) * {step_us}) MICROSECOND AS c,
      CASE WHEN n > {live_from} THEN ELT(1 + MOD(n, {len(LIVE_MIX)}), {mix})
        WHEN MOD(h, 100) = 0 THEN 'dead' WHEN MOD(h, 100) = 1 THEN 'cancelled' ELSE 'done' END AS st
    FROM (SELECT seq AS n, CAST(CRC32(seq) AS SIGNED) AS h FROM {source}) AS g0
  ) AS g1
) AS g2
"""


KEY_LINE = re.compile(r"^\s*(?:UNIQUE )?KEY `(\w+)` \(")
AUTO_INCREMENT = re.compile(r" AUTO_INCREMENT=\d+")
JOB_COLUMNS = (
    "id, tenant, report_type, params, status, attempt, max_attempts, timeout_s, next_attempt_at, run_at, "
    "ordering_key, on_predecessor_dead, blocked_by, callback_url, callback_status, callback_attempts, "
    "callback_last_error, progress, last_error, output_path, output_filename, output_content_type, "
    "output_size, replay_count, attempts_total, idempotency_key, request_hash, worker, heartbeat_at, "
    "cancel_requested, traceparent, created_at, started_at, finished_at, updated_at"
)


def sequence_source(use_engine: bool, first: int, last: int) -> str:
    """Numbers first..last as a row source with column `seq`: MariaDB's SEQUENCE engine when it is there,
    else a recursive CTE (needs max_recursive_iterations ≥ the chunk)."""
    if use_engine:
        return f"seq_{first}_to_{last}"
    return (
        f"(WITH RECURSIVE s(seq) AS (SELECT {first} UNION ALL SELECT seq + 1 FROM s WHERE seq < {last}) "
        "SELECT seq FROM s) AS s0"
    )


async def fill(bench: Bench) -> dict[str, Any]:
    """FILL_ROWS report_jobs in INSERT … SELECT chunks, then the dead letters of the dead ones (most
    archived), their alert deliveries and the completion callbacks of the jobs that asked for one."""
    from sqlalchemy import text

    now = datetime.now(UTC).replace(tzinfo=None)
    timings: dict[str, float] = {}
    async with bench.db.connect() as conn:
        await conn.execute(text("SET SESSION unique_checks = 0, foreign_key_checks = 0"))
        await conn.execute(text(f"SET SESSION max_recursive_iterations = {FILL_CHUNK + 10}"))
        try:
            await conn.execute(text("SELECT COUNT(*) FROM seq_1_to_3"))
            use_engine = True
        except Exception:
            use_engine = False
        await conn.commit()
        # Secondary indexes are dropped for the load and built again after it in one ALTER (a sorted build:
        # the whole fill took about two thirds of the time of keeping them up row by row); the table ends
        # as it began (checked below).
        create_before = (await conn.execute(text("SHOW CREATE TABLE report_jobs"))).one()[1]
        found = [
            (m.group(1), line.strip().rstrip(","))
            for line in create_before.splitlines()
            if (m := KEY_LINE.match(line))
        ]
        keys = [definition for _, definition in found]
        began = time.perf_counter()
        if found:
            drops = ", ".join(f"DROP INDEX `{name}`" for name, _ in found)
            await conn.execute(text(f"ALTER TABLE report_jobs {drops}"))
        for first in range(1, FILL_ROWS + 1, FILL_CHUNK):
            last = min(first + FILL_CHUNK - 1, FILL_ROWS)
            source = sequence_source(use_engine, first, last)
            await conn.execute(text(f"INSERT INTO report_jobs ({JOB_COLUMNS}) {jobs_select(source, now)}"))
            await conn.commit()
        timings["report_jobs_s"] = time.perf_counter() - began
        step = time.perf_counter()
        if keys:
            await conn.execute(text(f"ALTER TABLE report_jobs {', '.join(f'ADD {k}' for k in keys)}"))
        timings["indexes_s"] = time.perf_counter() - step
        create_after = (await conn.execute(text("SHOW CREATE TABLE report_jobs"))).one()[1]
        if AUTO_INCREMENT.sub("", create_after) != AUTO_INCREMENT.sub("", create_before):
            raise RuntimeError(f"report_jobs changed by the fill:\n{create_before}\n---\n{create_after}")
        step = time.perf_counter()
        now_sql = _ts(now)
        await conn.execute(text(f"""
INSERT INTO dead_letters (id, job_id, tenant, report_type, params, error, attempts, created_at, expire_at,
  archived_at, replayed_at, alert_status, alert_sent_at, alert_attempts, alert_next_at, alert_last_error,
  alert_message_id)
SELECT CONCAT('01DEADL', SUBSTRING(id, 8)), id, tenant, report_type, params, last_error, attempt, finished_at,
  finished_at + INTERVAL 7 DAY,
  IF(finished_at < {now_sql} - INTERVAL 7 DAY, finished_at + INTERVAL 7 DAY, NULL),
  NULL, IF(finished_at > {now_sql} - INTERVAL 1 HOUR, 'pending', 'sent'),
  IF(finished_at > {now_sql} - INTERVAL 1 HOUR, NULL, finished_at + INTERVAL 2 SECOND),
  IF(finished_at > {now_sql} - INTERVAL 1 HOUR, 0, 1), NULL, NULL, NULL
FROM report_jobs WHERE status = 'dead'"""))  # fmt: skip
        await conn.execute(text("""
INSERT INTO alert_deliveries (letter_id, sink, status, message_id, sent_at, attempts, next_attempt_at,
  last_error, created_at)
SELECT id, 'webhook', alert_status, IF(alert_status = 'sent', CONCAT('01MSG', SUBSTRING(id, 6)), NULL),
  alert_sent_at, alert_attempts, IF(alert_status = 'pending', created_at, NULL), NULL, created_at
FROM dead_letters"""))  # fmt: skip
        await conn.execute(text("""
INSERT INTO callback_deliveries (id, job_id, tenant, url, event, payload, status, attempts, next_attempt_at,
  last_error, created_at, delivered_at)
SELECT CONCAT('01CALLB', SUBSTRING(id, 8)), id, tenant, callback_url, CONCAT('job.', status),
  JSON_OBJECT('id', id, 'status', status), callback_status, callback_attempts, finished_at, NULL,
  finished_at, IF(callback_status = 'delivered', finished_at + INTERVAL 1 SECOND, NULL)
FROM report_jobs WHERE callback_status IS NOT NULL"""))  # fmt: skip
        await conn.commit()
        timings["letters_alerts_callbacks_s"] = time.perf_counter() - step
        step = time.perf_counter()
        for table in ("report_jobs", "dead_letters", "alert_deliveries", "callback_deliveries"):
            await conn.execute(text(f"ANALYZE TABLE {table}"))
        timings["analyze_s"] = time.perf_counter() - step
        counts = {
            str(status): int(n)
            for status, n in (
                await conn.execute(text("SELECT status, COUNT(*) FROM report_jobs GROUP BY status"))
            ).all()
        }
        tables = {
            table: int((await conn.execute(text(f"SELECT COUNT(*) FROM {table}"))).scalar() or 0)
            for table in ("dead_letters", "alert_deliveries", "callback_deliveries")
        }
        size = (
            await conn.execute(
                text(
                    "SELECT data_length + index_length FROM information_schema.tables "
                    "WHERE table_schema = DATABASE() AND table_name = 'report_jobs'"
                )
            )
        ).scalar()
    total = sum(timings.values())
    return {
        "rows": FILL_ROWS,
        "generator": "SEQUENCE engine (seq_1_to_N)" if use_engine else "recursive CTE",
        "chunk_rows": FILL_CHUNK,
        "seconds": round(total, 1),
        "rows_per_s": round(FILL_ROWS / total),
        **{k: round(v, 1) for k, v in timings.items()},
        "by_status": counts,
        "tables": tables,
        "report_jobs_mb": round(int(size or 0) / 2**20),
    }


def latency_summary(ms: list[float]) -> dict[str, Any]:
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 50), 2),
        "p95_ms": round(pct(ms, 95), 2),
        "max_ms": round(max(ms), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


async def time_scrapes(api: ApiServer, n: int) -> dict[str, Any]:
    """n GET /metrics back to back on one connection; the first (cold) one is reported apart."""
    import httpx

    ms: list[float] = []
    async with httpx.AsyncClient(base_url=api.base_url, timeout=SCRAPE_TIMEOUT_S) as client:
        for _ in range(n + 1):
            began = time.perf_counter()
            resp = await client.get("/metrics")
            ms.append((time.perf_counter() - began) * 1000)
            if resp.status_code != 200:
                raise RuntimeError(f"/metrics answered {resp.status_code}: {resp.text[:300]}")
    body = resp.text
    if family_total(body, "reports_state_up") != 1.0:
        raise RuntimeError(f"/metrics: reports_state_up is not 1:\n{api.proc.tail()}")
    series = sum(1 for line in body.splitlines() if line.startswith("reports_jobs{"))
    return dict(
        latency_summary(ms[1:]),
        first_ms=round(ms[0], 2),
        body_bytes=len(resp.content),
        reports_jobs_series=series,
        reports_jobs_total=family_total(body, "reports_jobs"),
        dead_letters_open=family_total(body, "reports_dead_letters_open"),
    )


async def state_round(bench: Bench) -> dict[str, Any]:
    """The state reads alone, in this process (no HTTP, no exposition): the whole round and each query,
    and EXPLAIN of every SELECT the round sends."""
    from sqlalchemy import event

    from app.core.config import get_settings
    from app.core.db import get_engine, session_scope
    from app.core.times import utcnow
    from app.fleet.repository import FleetRepository
    from app.observability.repository import StateRepository
    from app.observability.service import take_snapshot

    engine = get_engine()
    captured: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            captured.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", capture)
    try:
        await take_snapshot()
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", capture)
    rounds: list[float] = []
    for _ in range(STATE_ROUNDS):
        began = time.perf_counter()
        snap = await take_snapshot()
        rounds.append((time.perf_counter() - began) * 1000)
    if not snap.ok:
        raise RuntimeError("take_snapshot() failed: see the API's log")
    per_query: dict[str, list[float]] = {}

    async def timed(name: str, call: Awaitable[object]) -> None:
        began = time.perf_counter()
        await call
        per_query.setdefault(name, []).append((time.perf_counter() - began) * 1000)

    live_for = timedelta(seconds=get_settings().worker_live_for_s)
    for _ in range(STATE_ROUNDS):
        now = utcnow()
        async with session_scope() as session:
            state, fleet = StateRepository(session), FleetRepository(session)
            await timed("live_jobs", state.live_jobs(now))
            await timed("open_dead_letters", state.open_dead_letters())
            await timed("pending_alerts", state.pending_alerts())
            await timed("pending_callbacks", state.pending_callbacks())
            await timed("live_workers", fleet.live_counts(now - live_for))
            await timed("last_tick", fleet.last_tick_at())
    explains: list[dict[str, Any]] = []
    async with engine.connect() as conn:
        for statement, parameters in captured:
            params = tuple(parameters) if isinstance(parameters, list) else parameters
            rows = (await conn.exec_driver_sql("EXPLAIN " + statement, params)).mappings().all()
            explains.append({
                "sql": " ".join(statement.split())[:160],
                "plan": [
                    {k: r.get(k) for k in ("table", "type", "key", "rows", "Extra")} for r in rows
                ],
            })  # fmt: skip
        query_cache = (await conn.exec_driver_sql("SELECT @@query_cache_type")).scalar()
    return {
        "round": latency_summary(rounds),
        "queries_p50_ms": {name: round(pct(ms, 50), 2) for name, ms in per_query.items()},
        "explain": explains,
        "query_cache_type": str(query_cache),
    }


async def scrape_cost(bench: Bench) -> dict[str, Any]:
    log(f"metrics: fill report_jobs with {FILL_ROWS:,} rows ({LIVE_ROWS:,} live) in bulk SQL")
    await bench.clean()
    filled = await fill(bench)
    log(f"  filled in {filled['seconds']:.1f} s ({filled['rows_per_s']:,} rows/s; report_jobs "
        f"{filled['report_jobs_mb']} MB with indexes): {filled['by_status']}")  # fmt: skip
    uncached = await bench.launch_api("api-metrics-uncached", METRICS_CACHE_S="0")
    cached = await bench.launch_api("api-metrics-cached", METRICS_CACHE_S="5")
    try:
        log(f"  {SCRAPES} scrapes of GET /metrics, uncached (METRICS_CACHE_S=0) and cached (5 s)")
        out: dict[str, Any] = {
            "target_ms": SCRAPE_TARGET_MS,
            "target_rows": SCRAPE_TARGET_ROWS,
            "fill": filled,
            "uncached": await time_scrapes(uncached, SCRAPES),
            "cached": await time_scrapes(cached, SCRAPES),
        }
    finally:
        uncached.proc.stop()
        cached.proc.stop()
    out["state_round"] = await state_round(bench)
    u, c, s = out["uncached"], out["cached"], out["state_round"]["round"]
    log(f"  uncached p50 {u['p50_ms']:.1f} ms p95 {u['p95_ms']:.1f} ms max {u['max_ms']:.1f} ms; cached p50 "
        f"{c['p50_ms']:.1f} ms p95 {c['p95_ms']:.1f} ms; state reads alone p50 {s['p50_ms']:.1f} ms "
        f"({u['reports_jobs_series']} reports_jobs series, {u['body_bytes']:,} bytes)")  # fmt: skip
    for plan in out["state_round"]["explain"]:
        steps = "; ".join(f"{p['table']} {p['type']} key={p['key']} rows={p['rows']}" for p in plan["plan"])
        log(f"    EXPLAIN {plan['sql'][:60]}…: {steps}")
    return out


async def run(bench: Bench) -> None:
    began = time.perf_counter()
    res: dict[str, Any] = await throughput(bench)
    res["scrape"] = await scrape_cost(bench)
    res["seconds"] = round(time.perf_counter() - began, 1)
    bench.results["metrics"] = res
    log(f"  metrics phase took {res['seconds']:.0f} s")
