"""Declared report types in tests: a report-types file written (and rewritten) on disk, the data sources a
SQL type reads (a SQLite file, a `dw` database with a read-only user on the test MariaDB), and reading the
outputs back (csv, openpyxl)."""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from devtools.servers import MariaDBServer

DW_USER, DW_PASSWORD = "report_ro", "ro-pw-0123"


def sql_type(
    name: str,
    sql: str,
    *,
    source: str = "dw",
    params: Mapping[str, Any] | None = None,
    required: tuple[str, ...] = (),
    **fields: Any,
) -> str:
    """One `[report_types."name"]` table (and its params schema) in TOML."""
    lines = [f'[report_types."{name}"]', 'kind = "sql"', f'source = "{source}"']
    lines += [f"{key} = {json.dumps(value)}" for key, value in fields.items()]
    lines.append(f'sql = """\n{textwrap.dedent(sql).strip()}\n"""')
    lines.append(f'[report_types."{name}".params]')
    lines.append(f'type = "object"\nadditionalProperties = false\nrequired = {json.dumps(list(required))}')
    for prop, prop_schema in (params or {}).items():
        lines.append(f'[report_types."{name}".params.properties.{prop}]')
        lines += [f"{key} = {json.dumps(value)}" for key, value in prop_schema.items()]
    return "\n".join(lines) + "\n\n"


def write_file(path: Path, text: str) -> Path:
    """Write the file so that a watcher sees a change even within the same clock tick (mtime moved on)."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text, encoding="utf-8")
    now = max(path.stat().st_mtime_ns, before + 1_000_000)
    os.utime(path, ns=(now, now))
    return path


def sqlite_source(path: Path, rows: int) -> str:
    """A SQLite file with `sales(id, day, region, amount, note)`, `rows` rows; its async URL."""
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE IF EXISTS sales")
        conn.execute(
            "CREATE TABLE sales (id INTEGER PRIMARY KEY, day TEXT, region TEXT, amount REAL, note TEXT)"
        )
        conn.executemany(
            "INSERT INTO sales VALUES (?, ?, ?, ?, ?)",
            (
                (i, f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}", f"r{i % 7}", i * 1.5, None)
                for i in range(1, rows + 1)
            ),
        )
    return f"sqlite+aiosqlite:///{path}"


def mariadb_source(server: MariaDBServer, rows: int, database: str = "dw") -> str:
    """Database `dw` on the test MariaDB with `sales(id, day, region, amount, note, at)` (DATE, DECIMAL,
    DATETIME), `rows` rows, and a user that may only SELECT there; its async URL."""
    digits = len(str(rows - 1))
    number = " + ".join(f"d{i}.n * {10**i}" for i in range(digits))  # 0 .. rows - 1 from a digits table
    joins = " CROSS JOIN ".join(f"{database}.digits d{i}" for i in range(digits))
    server.sql(
        f"DROP DATABASE IF EXISTS {database}; CREATE DATABASE {database};"
        f"CREATE TABLE {database}.digits (n INT); INSERT INTO {database}.digits VALUES"
        " (0),(1),(2),(3),(4),(5),(6),(7),(8),(9);"
        f"CREATE TABLE {database}.sales (id INT PRIMARY KEY, day DATE, region VARCHAR(20),"
        " amount DECIMAL(12,2), note VARCHAR(200) NULL, at DATETIME);"
        f"INSERT INTO {database}.sales SELECT n, DATE_ADD('2026-01-01', INTERVAL n % 365 DAY),"
        " CONCAT('r', n % 7), n * 1.25, NULL, TIMESTAMP('2026-01-01 08:30:00') + INTERVAL n SECOND"
        f" FROM (SELECT {number} + 1 AS n FROM {joins}) AS numbers WHERE n <= {rows};"
        f"CREATE USER IF NOT EXISTS '{DW_USER}'@'%' IDENTIFIED BY '{DW_PASSWORD}';"
        f"GRANT SELECT ON {database}.* TO '{DW_USER}'@'%'; FLUSH PRIVILEGES;"
    )
    return f"mysql+asyncmy://{DW_USER}:{DW_PASSWORD}@127.0.0.1:{server.port}/{database}"


def csv_rows(content: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(content.decode("utf-8"))))


def xlsx_rows(content: bytes) -> list[tuple[Any, ...]]:
    """Every row of every sheet (header rows included), read in openpyxl's read-only mode."""
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(content), read_only=True)
    try:
        return [row for sheet in book.worksheets for row in sheet.iter_rows(values_only=True)]
    finally:
        book.close()
