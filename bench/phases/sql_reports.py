"""SQL reports phase (issue 30, BENCH_PHASES=sql_reports): a declared SQL type streams BENCH_SQL_ROWS
(1,000,000) rows of a MariaDB table to CSV and to XLSX on one real worker process; rows/s, the worker's
peak RSS growth, and the file read back and counted.

Growth is counted twice: from the idle worker before any report ("cold": it includes loading the driver,
xlsxwriter and the like once), and from after a 1,000-row report of the same type ("warm": what the rows
cost). The peak is the kernel's VmHWM, reset (clear_refs) right before the measured report, and the sampled
RSS."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import SCALE, TENANT, log
from bench.context import Bench
from bench.procs import rss_bytes

SQL_ROWS = max(10_000, round(int(os.environ.get("BENCH_SQL_ROWS", "1000000")) * SCALE))
DW = "bench_dw"
IDLE_START_S = 3.0
SAMPLE_S = 0.1
MB = 2**20
RSS_TARGET_MB = 100
COLUMNS = "id, day, region, amount, note, at"
TYPES = """
[report_types."bench.sql_{name}"]
kind = "sql"
source = "dw"
format = "{fmt}"
filename = "sales-{name}"
timeout_s = 3600
query_timeout_s = 3500
sql = "SELECT {columns} FROM sales ORDER BY id {limit}"
"""


def fill(bench: Bench) -> float:
    """`sales` with SQL_ROWS rows (a date, a decimal, a datetime, text, a null), from a digits table."""
    began = time.perf_counter()
    digits = max(1, len(str(SQL_ROWS - 1)))
    joins = " CROSS JOIN ".join(f"d d{i}" for i in range(digits))
    number = " + ".join(f"d{i}.n * {10**i}" for i in range(digits))
    bench.mariadb.sql(
        f"DROP DATABASE IF EXISTS {DW}; CREATE DATABASE {DW}; USE {DW};"
        "CREATE TABLE d (n INT); INSERT INTO d VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9);"
        "CREATE TABLE sales (id INT PRIMARY KEY, day DATE, region VARCHAR(20), amount DECIMAL(12,2),"
        " note VARCHAR(200) NULL, at DATETIME);"
        f"INSERT INTO sales SELECT {number} + 1 AS id, DATE_ADD('2026-01-01', INTERVAL ({number}) % 365 DAY),"
        f" CONCAT('region-', ({number}) % 97), ({number}) * 1.25, IF(({number}) % 3 = 0, NULL, 'note text'),"
        f" TIMESTAMP('2026-01-01 08:30:00') + INTERVAL ({number}) SECOND FROM {joins}"
        f" WHERE {number} < {SQL_ROWS};",
        timeout=1800,
    )
    return time.perf_counter() - began


def reset_peak_rss(pid: int) -> None:
    """Start VmHWM again from the current RSS (Linux ≥ 4.0, same user or root)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def peak_rss_bytes(pid: int) -> int:
    """VmHWM: the most the process ever had resident."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def count_rows(path: Path, fmt: str) -> int:
    """Data rows of the file (header left out), read back as a user would open it."""
    if fmt == "csv":
        with path.open(newline="", encoding="utf-8") as fh:
            return sum(1 for _ in csv.reader(fh)) - 1
    from openpyxl import load_workbook

    book = load_workbook(path, read_only=True)
    try:
        return sum(sum(1 for _ in sheet.iter_rows(values_only=True)) - 1 for sheet in book.worksheets)
    finally:
        book.close()


async def run_report(bench: Bench, report_type: str, pid: int) -> tuple[str, int]:
    """Submit one job and wait for its end, sampling the worker's RSS: (job id, highest RSS seen)."""
    from app.jobs import service

    job_id = (await service.submit(TENANT, service.SubmitRequest(report_type=report_type, params={}))).job.id
    max_rss, status = 0, "pending"
    while status not in ("done", "dead"):
        max_rss = max(max_rss, rss_bytes(pid))
        status = str(await bench.scalar(f"SELECT status FROM report_jobs WHERE id = '{job_id}'"))
        await asyncio.sleep(SAMPLE_S)
    if status != "done":
        error = await bench.scalar(f"SELECT last_error FROM report_jobs WHERE id = '{job_id}'")
        raise RuntimeError(f"{report_type} ended {status}: {error}")
    return job_id, max_rss


async def one_format(bench: Bench, fmt: str, env: dict[str, str]) -> dict[str, Any]:
    await bench.clean()
    worker = bench.spawn_worker(f"worker-sql-{fmt}", **env)
    try:
        await asyncio.sleep(IDLE_START_S)
        cold = rss_bytes(worker.pid)
        await run_report(bench, f"bench.sql_{fmt}_warm", worker.pid)
        await asyncio.sleep(1.0)
        warm = rss_bytes(worker.pid)
        reset_peak_rss(worker.pid)
        job_id, sampled = await run_report(bench, f"bench.sql_{fmt}", worker.pid)
        peak = max(peak_rss_bytes(worker.pid), sampled)
        if not worker.alive():
            raise RuntimeError(f"sql worker exited:\n{worker.tail()}")
    finally:
        worker.stop()
    row = await bench.scalar(
        "SELECT JSON_OBJECT('path', output_path, 'rows', output_rows, 'size', output_size,"
        f" 'started', started_at, 'finished', finished_at) FROM report_jobs WHERE id = '{job_id}'"
    )
    fig = json.loads(row)
    started, finished = (datetime.fromisoformat(fig[k]) for k in ("started", "finished"))
    seconds = (finished - started).total_seconds()
    began = time.perf_counter()
    read_back = await asyncio.to_thread(count_rows, bench.work / "outputs" / fig["path"], fmt)
    growth_warm_mb, growth_cold_mb = (peak - warm) / MB, (peak - cold) / MB
    return {
        "rows": fig["rows"],
        "rows_read_back": read_back,
        "file_mb": round(fig["size"] / MB, 1),
        "seconds": round(seconds, 1),
        "rows_per_s": round(fig["rows"] / seconds) if seconds else None,
        "rss_cold_mb": round(cold / MB, 1),
        "rss_warm_mb": round(warm / MB, 1),
        "rss_peak_mb": round(peak / MB, 1),
        "rss_growth_mb": round(growth_warm_mb, 1),
        "rss_growth_from_cold_mb": round(growth_cold_mb, 1),
        "rss_target_mb": RSS_TARGET_MB,
        "met": growth_cold_mb < RSS_TARGET_MB and read_back == fig["rows"] == SQL_ROWS,
        "read_back_seconds": round(time.perf_counter() - began, 1),
    }


async def run(bench: Bench) -> None:
    from app.core.config import reset_settings
    from app.reports.declared import declarations

    log(f"sql_reports: filling {DW}.sales with {SQL_ROWS:,} rows")
    fill_s = fill(bench)
    types = bench.work / "report-types.toml"
    types.write_text(
        "".join(
            TYPES.format(name=fmt + suffix, fmt=fmt, columns=COLUMNS, limit=limit)
            for fmt in ("csv", "xlsx")
            for suffix, limit in (("", ""), ("_warm", "LIMIT 1000"))  # the warm-up: 1,000 rows first
        )
    )
    dw_url = bench.mariadb.url.rsplit("/", 1)[0] + f"/{DW}"
    env = {"REPORT_TYPES_FILE": str(types), "DATA_SOURCES": json.dumps({"dw": dw_url})}
    os.environ.update(env)  # this process submits: it validates against the same declared types
    reset_settings()
    if declarations.load_now(force=True) is not True:
        raise RuntimeError(f"bench report types refused: {declarations.status.error}")
    results: dict[str, Any] = {"rows": SQL_ROWS, "fill_seconds": round(fill_s, 1)}
    for fmt in ("csv", "xlsx"):
        fig = results[fmt] = await one_format(bench, fmt, env)
        log(
            f"  {fmt}: {fig['rows']:,} rows in {fig['seconds']} s = {fig['rows_per_s']:,} rows/s; worker RSS "
            f"cold {fig['rss_cold_mb']}, warm {fig['rss_warm_mb']} → peak {fig['rss_peak_mb']} MB "
            f"(+{fig['rss_growth_mb']} MB from warm, +{fig['rss_growth_from_cold_mb']} MB from cold); file "
            f"{fig['file_mb']} MB, {fig['rows_read_back']:,} rows read back in {fig['read_back_seconds']} s"
        )
    bench.results["sql_reports"] = results
