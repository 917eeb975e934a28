"""The metrics phase's fill: FILL_ROWS report_jobs (the newest LIVE_ROWS live) in bulk INSERT … SELECT, then
the dead letters of the dead ones, their alert deliveries and the callbacks, with the table as it began."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

from bench.common import SCALE
from bench.context import Bench

SCRAPE_TARGET_ROWS = 1_000_000
FILL_ROWS = max(10_000, round(SCRAPE_TARGET_ROWS * SCALE))
LIVE_ROWS = max(200, round(4_000 * SCALE))  # pending, scheduled, retrying, running: the newest rows
FILL_CHUNK = 100_000  # rows per INSERT … SELECT (one transaction each: undo and redo stay small)
FILL_DAYS = 30  # created_at spread over the last 30 days

TENANTS = 20
REPORT_TYPES = (
    "sales.daily", "sales.monthly", "ledger.full", "ledger.delta", "inventory.snapshot", "payroll.run",
    "tax.vat", "export.csv",
)  # fmt: skip
# Live rows by status, one in ten each: 40 % pending, 30 % scheduled, 20 % retrying, 10 % running.
LIVE_MIX = ("pending",) * 4 + ("scheduled",) * 3 + ("retrying",) * 2 + ("running",)


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
