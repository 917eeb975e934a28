"""The scale phase's section of the report (issue 28): each figure at each table size with the rows MariaDB
read for it, and its ratio to the first size (the empty table); figures that grew over 1.5× are flagged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from bench.scale_explain import explain_lines

FLAG_RATIO = 1.5
ROWS_NOISE = 100  # rows-read growth under this many rows an operation is not flagged (API key lookups, …)


@dataclass(frozen=True)
class Figure:
    key: str  # entry of a size's results
    label: str
    unit: str
    value: str  # field holding the value
    higher_is_better: bool = False
    rows_per: str = "op"  # what the rows are counted per
    rows_field: str = ""  # a sub-dict holding the rows figure (bulk: per job)


FIGURES = (
    Figure("submit_single", "single submit POST /v1/jobs, p50 (one at a time)", "ms", "p50_ms",
           rows_per="request"),
    Figure("submit_bulk", "bulk submit POST /v1/jobs/batch (500 a request, one at a time)", "jobs/s",
           "jobs_per_s", True, "job", "per_job"),
    Figure("list_first_page", "GET /v1/jobs, first page (big tenant's key), p50", "ms", "p50_ms",
           rows_per="request"),
    Figure("list_status_done", "GET /v1/jobs?status=done, p50", "ms", "p50_ms", rows_per="request"),
    Figure("list_rare_type", "GET /v1/jobs?report_type=<1 % type>, p50", "ms", "p50_ms", rows_per="request"),
    Figure("list_no_match", "GET /v1/jobs?report_type=<no such type>, p50", "ms", "p50_ms",
           rows_per="request"),
    Figure("metrics_uncached", "GET /metrics, uncached (METRICS_CACHE_S=0), p50", "ms", "p50_ms",
           rows_per="scrape"),
    Figure("console_overview", "console overview refresh GET /ui/ (big tenant's key), p50", "ms", "p50_ms",
           rows_per="refresh"),
    Figure("tick", "one scheduler tick (run_tick in-process), p50 of 3", "ms", "p50_ms", rows_per="tick"),
    Figure("drain", "drain by 2 worker processes", "jobs/s", "jobs_per_s", True, "job"),
    Figure("purge", "retention purge, purge_expired_jobs() back to back", "jobs/s", "jobs_per_s", True,
           "job purged"),
    Figure("recovery", "recovery after FLUSHALL: backlog back in its lanes (ticks back to back)", "s",
           "seconds", rows_per="job recovered"),
)  # fmt: skip


def size_label(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:g}M"
    if n >= 1_000:
        return f"{n / 1_000:g}k"
    return str(n)


def _value(entry: dict[str, Any], fig: Figure) -> tuple[float, float, float] | None:
    """(value, handler reads, InnoDB rows read) of a figure at one size, rows per unit of work."""
    data = entry.get(fig.key)
    if not isinstance(data, dict) or data.get(fig.value) is None:
        return None
    rows = data.get(fig.rows_field, data) if fig.rows_field else data
    return float(data[fig.value]), float(rows["handler_reads_per_op"]), float(rows["rows_read_per_op"])


def cost_ratio(fig: Figure, value: float, base: float) -> float:
    """How much more the figure costs than at the first size: time ÷ time, or rate⁻¹ ÷ rate⁻¹."""
    if not base or not value:
        return math.nan
    return base / value if fig.higher_is_better else value / base


def rows_ratio(rows: float, base: float) -> float:
    return rows / max(base, 1.0)


def flagged(fig: Figure, value: float, rows: float, base: tuple[float, float, float]) -> list[str]:
    why = []
    if cost_ratio(fig, value, base[0]) > FLAG_RATIO:
        why.append("time")
    if rows_ratio(rows, base[1]) > FLAG_RATIO and rows - base[1] > ROWS_NOISE:
        why.append("rows")
    return why


def scale_rows(res: dict[str, Any]) -> list[str]:
    """The table: a line per figure, a column per size: value, rows read, ratio to the first size."""
    sc = res.get("scale_phase")
    if not sc or not sc.get("sizes"):
        return []
    sizes = sc["sizes"]
    head = ["figure (unit)", "rows counted per"] + [f"{size_label(s['rows_in_table'])} rows" for s in sizes]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for fig in FIGURES:
        base = _value(sizes[0], fig)
        cells = [f"{fig.label} ({fig.unit})", fig.rows_per]
        for i, entry in enumerate(sizes):
            got = _value(entry, fig)
            if got is None:
                cells.append("—")
                continue
            value, rows, innodb = got
            text = f"{value:,.1f} {fig.unit}; {rows:,.0f} handler reads, {innodb:,.0f} rows read"
            if i and base is not None:
                ratio = cost_ratio(fig, value, base[0])
                text += f"; **{ratio:.2f}×** cost, rows {rows_ratio(rows, base[1]):,.1f}×"
                why = flagged(fig, value, rows, base)
                if why:
                    text += f" ⚠ over {FLAG_RATIO:g}× ({' and '.join(why)})"
            cells.append(text)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def fill_lines(sc: dict[str, Any]) -> list[str]:
    out = []
    for entry in sc["sizes"]:
        f = entry.get("fill")
        if not f:
            continue
        tables = ", ".join(f"{k} {v['mb']:,} MB" for k, v in f.get("tables", {}).items())
        cut = f" — **cut short** at {f['reached']:,} of {f['wanted']:,} (BENCH_SCALE_FILL_BUDGET_S)" if f[
            "cut_short"
        ] else ""  # fmt: skip
        out.append(
            f"- to {entry['rows_in_table']:,} rows: {f['rows']:,} finished jobs (+ attempts, dead letters) "
            f"in {f['seconds']:,.0f} s ({f['rows_per_s'] or 0:,} jobs/s; inserts "
            f"{f.get('insert_s', 0):,.0f} s, "
            f"secondary indexes rebuilt {f.get('add_indexes_s', 0):,.0f} s, ANALYZE "
            f"{f.get('analyze_s', 0):,.0f} s); tables after: {tables}{cut}"
        )
    return out


def scale_note(res: dict[str, Any]) -> list[str]:
    sc = res.get("scale_phase")
    if not sc or not sc.get("sizes"):
        return []
    srv = sc.get("server", {})
    pool = int(srv.get("innodb_buffer_pool_size", 0)) // 2**20
    last = sc["sizes"][-1]
    rec, pur = last.get("recovery", {}), last.get("purge", {})
    where = []
    for entry in sc["sizes"]:
        if entry.get("explain"):
            where += [
                "",
                f"Where the rows go at {entry['rows_in_table']:,} rows (each figure's SELECTs, UPDATEs and "
                "DELETEs replayed through its service call under ANALYZE FORMAT=JSON, rolled back; "
                "statements reading ≥ 1,000 rows):",
                *explain_lines(entry["explain"]),
            ]
    notes = [
        f"## Scale (issue 28): the same figures as the table grows ({sc['backlog']:,} pending jobs of a "
        "paused tenant at every size)",
        "",
        *scale_rows(res),
        "",
        f"Rows read: SHOW GLOBAL STATUS deltas over the measured operations (Handler_read_* added up, and "
        "Rows_read, MariaDB's count of rows read from tables: 10.11 has no Innodb_rows_read), divided by "
        "the operations, with nothing else running (the API under test idle between requests, no worker "
        "or scheduler process; the status query's own reads, "
        f"{sum(v for k, v in sc.get('status_overhead', {}).items() if k.startswith('Handler_read'))} handler "
        "reads, taken off). Cost ratio: time ÷ time at the first size (rates: inverted, so above 1 is "
        f"worse); flagged (⚠) when the cost or the rows read grew over {FLAG_RATIO:g}× (rows: and by more "
        f"than {ROWS_NOISE} an operation).",
        "",
        f"Setup: private MariaDB with a {pool} MB buffer pool (resized online for this phase), redo log "
        f"{int(srv.get('innodb_log_file_size', 0)) // 2**20} MB, innodb_flush_log_at_trx_commit="
        f"{srv.get('innodb_flush_log_at_trx_commit', '?')}; one API process (uvicorn, METRICS_CACHE_S=0); "
        "reads repeated up to 20 times after a warm-up (at most 10 s each figure); submits: 200 single POSTs "
        f"one at a time, then {sc['drain_jobs']:,} jobs in batches of 500, which 2 worker processes then "
        f"drain (progress from Redis, checked in MySQL); purge: {sc['purge_rows']:,} finished jobs past "
        "retention (with their attempts) added, then purge_expired_jobs() called until none is left; "
        "recovery: FLUSHALL, then run_tick(use_lease=False) back to back until every backlog job is in its "
        "lane (at most 6 ticks).",
        "",
        f"At the largest size: purge {pur.get('jobs_per_call', 0):,.0f} jobs a call, so one call a tick "
        f"(SCAN_INTERVAL_S={pur.get('scan_interval_s', 0):g}) keeps up with "
        f"{pur.get('ceiling_jobs_per_s_one_call_a_tick', 0):,.2f} jobs/s; recovery took "
        f"{rec.get('ticks', 0)} tick(s) ({', '.join(f'{s:g} s' for s in rec.get('tick_s', []))}), "
        + (
            f"{rec['seconds_at_scan_interval']:,.1f} s at the scheduler's pace."
            if rec.get("seconds_at_scan_interval") is not None
            else f"**not recovered**: {rec.get('in_lanes_after_each_tick', [0])[-1]:,} of "
            f"{rec.get('backlog', 0):,} back."
        ),
        "",
        "Fill (bulk SQL: SEQUENCE engine in INSERT … SELECT, 100k rows a statement, ULID ids, secondary "
        "indexes of report_jobs dropped and rebuilt in one ALTER):",
        *fill_lines(sc),
        *where,
    ]
    return notes
