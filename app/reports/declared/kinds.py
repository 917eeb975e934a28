"""The kinds a declared report type may have, in one place: kind name → how its fields are parsed (and
checked against the outside world), and the report function made from them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from app.reports.declared.http import http_report, parse_http_spec
from app.reports.declared.sql import check_sql_spec, parse_sql_spec, sql_report
from app.reports.registry import ReportFn


@dataclass(frozen=True)
class Kind:
    """A kind is a plug-in of three functions over its own spec object.

    `parse(name, table, params_schema)` gets the type's table without the common fields (description,
    params, timeout_s, max_attempts, priority, max_concurrency, kind), checks it without I/O and returns
    the spec, raising `DeclarationError(field, reason)`; `report(spec)` makes the report function;
    `check(spec)`, if any, may ask the outside world at load (the SQL kind has its source plan the query)
    and raises `DeclarationError` too.
    """

    parse: Callable[[str, dict[str, Any], dict[str, Any]], Any]
    report: Callable[[Any], ReportFn]
    check: Callable[[Any], Awaitable[None]] | None = None


KINDS: dict[str, Kind] = {
    "sql": Kind(parse_sql_spec, sql_report, check_sql_spec),
    "http": Kind(parse_http_spec, http_report),
}
