"""The SQL reports phase's rows in the benchmark table (issue 30): rows/s, the worker's peak RSS growth
against the 100 MB target, and the file read back, for CSV and XLSX."""

from __future__ import annotations

from typing import Any

from bench.targets import Row


def sql_rows(res: dict[str, Any]) -> list[Row]:
    sql = res.get("sql_reports")
    if not sql:
        return []
    rows = []
    for fmt in ("csv", "xlsx"):
        fig = sql.get(fmt)
        if not fig:
            continue
        rows.append(Row(
            f"SQL report, {fig['rows']:,} rows to {fmt.upper()} (1 worker): rows/s; worker peak RSS growth",
            f"{fig['rows_per_s']:,}/s in {fig['seconds']} s; +{fig['rss_growth_mb']} MB"
            f" (+{fig['rss_growth_from_cold_mb']} MB from an idle cold worker)",
            f"read back: {fig['rows_read_back']:,} rows, {fig['file_mb']} MB", None,
            f"done, file opens with every row, RSS growth < {fig['rss_target_mb']} MB (issue 30)", fig["met"],
        ))  # fmt: skip
    return rows
