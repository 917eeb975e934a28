"""Where a figure's rows go: the operation run once in this process with its SELECTs, UPDATEs and DELETEs
captured, then each replayed under ANALYZE FORMAT=JSON (MariaDB runs it and counts the rows each table access
read) in a transaction rolled back after it.

The HTTP figures are replayed through the service calls their routes make (same queries, same tenant).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from bench.scale_fill import BIG_TENANT, NO_TYPE, RARE_TYPE

T = TypeVar("T")
LIST_LIMIT = 51  # the route asks for its page size + 1 (50 + 1): the next cursor
SHOWN = 4  # statements kept per operation, most rows first
SQL_CHARS = 400
REPLAYED = ("SELECT", "UPDATE", "DELETE")
COLUMN_LIST = re.compile(r"^SELECT (.+?) FROM ")


def short_sql(statement: str) -> str:
    """The statement on one line, a long column list before its first FROM shown as a count."""
    flat = " ".join(statement.split())
    m = COLUMN_LIST.match(flat)
    if m and m.group(1).count(",") >= 4:
        flat = f"SELECT <{m.group(1).count(',') + 1} columns> {flat[m.end(1) + 1 :]}"
    return flat[:SQL_CHARS]


def _tables(node: Any) -> list[dict[str, Any]]:
    """Every table access of an ANALYZE FORMAT=JSON plan (nested loops, subqueries, derived tables)."""
    if isinstance(node, list):
        return [t for item in node for t in _tables(item)]
    if not isinstance(node, dict):
        return []
    found = [node] if "table_name" in node else []
    return found + [t for key, value in node.items() if key != "table_name" for t in _tables(value)]


async def analyze(conn: Any, statement: str, params: Any) -> dict[str, Any]:
    """ANALYZE FORMAT=JSON of one statement (rolled back after): the rows each table access read (r_loops ×
    r_rows) and its plan."""
    args = tuple(params) if isinstance(params, list) else params
    try:
        raw = (await conn.exec_driver_sql("ANALYZE FORMAT=JSON " + statement, args)).scalar()
    finally:
        await conn.rollback()
    plan = json.loads(raw)
    accesses = []
    for t in _tables(plan):
        rows = float(t.get("r_loops", 0) or 0) * float(t.get("r_rows", 0) or 0)
        accesses.append({
            "table": t.get("table_name"), "access_type": t.get("access_type"), "key": t.get("key"),
            "rows_read": round(rows), "r_loops": t.get("r_loops"),
        })  # fmt: skip
    return {
        "sql": short_sql(statement),
        "rows_read": sum(a["rows_read"] for a in accesses),
        "ms": round(float(plan.get("query_block", {}).get("r_total_time_ms", 0) or 0), 1),
        "accesses": accesses,
    }


async def captured(op: Callable[[], Awaitable[T]]) -> tuple[T, list[tuple[str, Any]]]:
    """Run `op`, capturing the SELECTs, UPDATEs and DELETEs it sends (with their parameters)."""
    from sqlalchemy import event

    from app.core.db import get_engine

    engine = get_engine()
    statements: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        if statement.lstrip()[:6].upper() in REPLAYED:
            statements.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", capture)
    try:
        result = await op()
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", capture)
    return result, statements


async def replay(statements: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """ANALYZE each statement (rolled back); the SHOWN that read the most rows."""
    from app.core.db import get_engine

    out = []
    async with get_engine().connect() as conn:
        for statement, params in statements:
            out.append(await analyze(conn, statement, params))
    out.sort(key=lambda s: -s["rows_read"])
    return out[:SHOWN]


async def explain(op: Callable[[], Awaitable[object]]) -> list[dict[str, Any]]:
    """Run `op` once, then replay its statements under ANALYZE: the SHOWN that read the most rows."""
    _, statements = await captured(op)
    return await replay(statements)


def operations() -> dict[str, Callable[[], Awaitable[object]]]:
    """The figures whose queries are replayed, each as the service call its route or process makes."""
    from app.console import service as console
    from app.core.states import JobStatus
    from app.core.tenancy import TenantScope
    from app.jobs import service as jobs
    from app.jobs.list_repository import JobFilter
    from app.observability.service import take_snapshot

    scope = TenantScope.only(BIG_TENANT)

    def page(**filters: Any) -> Callable[[], Awaitable[object]]:
        return lambda: jobs.list_jobs(JobFilter(scope=scope, **filters), None, LIST_LIMIT)

    return {
        "list_first_page": page(),
        "list_status_done": page(statuses=(JobStatus.DONE,)),
        "list_rare_type": page(report_type=RARE_TYPE),
        "list_no_match": page(report_type=NO_TYPE),
        "metrics_uncached": take_snapshot,
        "console_overview": lambda: console.overview(scope),
    }


async def explain_all() -> dict[str, list[dict[str, Any]]]:
    return {name: await explain(op) for name, op in operations().items()}


def access_text(access: dict[str, Any]) -> str:
    key = f" key={access['key']}" if access["key"] else ""
    return f"{access['table']} {access['access_type']}{key} {access['rows_read']:,} rows"


def explain_lines(found: dict[str, list[dict[str, Any]]], least_rows: int = 1000) -> list[str]:
    """Markdown: per figure, each statement that read at least `least_rows` rows, with its accesses."""
    lines = []
    for name, statements in found.items():
        for s in statements:
            if s["rows_read"] < least_rows:
                continue
            how = "; ".join(access_text(a) for a in s["accesses"] if a["rows_read"])
            lines.append(f"- **{name}**: {s['rows_read']:,} rows, {s['ms']:,.0f} ms ({how}): `{s['sql']}`")
    return lines
