"""`kind = "sql"`: a SELECT over a named read-only data source, its `:name` parameters bound from the job's
params, streamed to CSV or XLSX. Checked at load (and planned by the source); run by `sql_report(spec)`.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from sqlalchemy import text

from app.core.config import get_settings
from app.reports.base import PermanentError, ReportContext
from app.reports.declared import repository
from app.reports.declared.errors import DeclarationError
from app.reports.declared.params import DeclaredParams, properties
from app.reports.formats import FORMATS, check_format
from app.reports.registry import ReportFn, registry

log = logging.getLogger(__name__)

FIELDS = {"source", "sql", "format", "filename", "query_timeout_s", "max_rows", "count_first"}
FETCH_ROWS = 2_000  # rows per fetch from the server-side cursor (and per write)
FENCE_S = 2.0  # our own limit sits this far past the database's, so the database's message wins
DEFAULT_QUERY_SHARE = 0.9  # no query_timeout_s: this share of the attempt's time limit
EXPLAIN_LIMIT_S = 5.0
LOG_EVERY_ROWS = 100_000
# Parameters the job itself binds (never the params): a report sees only its own tenant's rows if it says so.
RESERVED_BINDS = {
    "tenant": "the job's tenant",
    "scheduled_for": "the schedule's fire time (naive UTC; null for a job no schedule made)",
}
_FILENAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# Quoted strings, quoted identifiers and comments: what the statement checks below must not look inside.
_NOISE = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`|--[^\n]*|#[^\n]*|/\*.*?\*/", re.S)
_WRITES = re.compile(r"\b(INTO|FOR\s+UPDATE|LOCK\s+IN\s+SHARE\s+MODE|FOR\s+SHARE)\b", re.I)


@dataclass(frozen=True)
class SqlSpec:
    type_name: str
    source: str
    sql: str
    binds: tuple[str, ...]
    format: str = "csv"
    format_param: bool = False  # the params schema has a `format` property: the job may choose
    filename: str = ""
    query_timeout_s: float | None = None
    max_rows: int | None = None
    count_first: bool = False
    probe: tuple[tuple[str, Any], ...] = ()  # a value for each bind to plan the query with (not null: LIMIT)


_PROBE_BY_TYPE = {"integer": 1, "number": 1, "string": "", "boolean": False}


def probe_value(prop: Any) -> Any:
    """A value of the param's type for EXPLAIN: its default, else 1, "" or false (null would break `LIMIT
    :n`, an empty string is a value of any text column)."""
    if not isinstance(prop, dict):
        return None
    if prop.get("default") is not None:
        return prop["default"]
    kinds = prop.get("type")
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if kind in _PROBE_BY_TYPE:
            return _PROBE_BY_TYPE[kind]
    choices = prop.get("enum")
    return choices[0] if isinstance(choices, list) and choices else None


def _statement_checks(sql: str) -> str:
    """The SQL without a trailing `;`, or DeclarationError: one SELECT (or WITH … SELECT), nothing else."""
    stripped = sql.strip().rstrip(";").strip()
    if not stripped:
        raise DeclarationError("sql", "is empty")
    bare = _NOISE.sub(" ", stripped)
    if bare.count("'") % 2 or bare.count('"') % 2 or bare.count("`") % 2:
        raise DeclarationError("sql", "has an unterminated quoted string or identifier")
    if bare.count("(") != bare.count(")"):
        raise DeclarationError("sql", "has unbalanced parentheses")
    if ";" in bare:
        raise DeclarationError("sql", "must be a single statement (found ';' inside it)")
    first = re.match(r"[\s(]*([A-Za-z]+)", bare)
    if first is None or first.group(1).upper() not in ("SELECT", "WITH"):
        word = first.group(1).upper() if first else stripped[:20]
        raise DeclarationError("sql", f"must be a SELECT (or WITH … SELECT) statement, not {word}")
    found = _WRITES.search(bare)
    if found:
        raise DeclarationError("sql", f"{found.group(1).upper()} is not allowed in a read-only report")
    return stripped


def bind_names(sql: str) -> tuple[str, ...]:
    """The `:name` parameters as SQLAlchemy's `text()` finds them (a literal colon is written `\\:`)."""
    return tuple(text(sql).compile().params)


def _number(table: dict[str, Any], field: str, *, integer: bool = False) -> Any:
    value = table.get(field)
    if value is None:
        return None
    valid = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not valid or value <= 0:
        what = "a whole number" if integer else "a number"
        raise DeclarationError(field, f"must be {what} > 0")
    return value


def parse_sql_spec(name: str, table: dict[str, Any], params_schema: dict[str, Any]) -> SqlSpec:
    """The `sql` kind's fields of a declared type (the type's table without the common fields), checked
    without I/O: known fields, a known source, one SELECT whose parameters the schema declares."""
    unknown = sorted(set(table) - FIELDS)
    if unknown:
        raise DeclarationError(
            unknown[0], f"unknown field of kind 'sql' (known: {', '.join(sorted(FIELDS))})"
        )
    source = table.get("source")
    if not isinstance(source, str) or not source:
        raise DeclarationError("source", "required: the name of a data source in DATA_SOURCES")
    sources = get_settings().data_sources
    if source not in sources:
        raise DeclarationError(
            "source",
            f"unknown data source {source!r} (DATA_SOURCES has: {', '.join(sorted(sources)) or 'none'})",
        )
    broken = repository.check_url(sources[source].get_secret_value())
    if broken:
        raise DeclarationError("source", f"data source {source!r}: {broken}")
    raw_sql = table.get("sql")
    if not isinstance(raw_sql, str):
        raise DeclarationError("sql", "required: the SELECT to run, as a string")
    sql = _statement_checks(raw_sql)
    try:
        binds = bind_names(sql)
    except Exception as exc:
        raise DeclarationError("sql", f"does not parse: {exc}") from None
    props = properties(params_schema)
    clash = sorted(set(props) & set(RESERVED_BINDS))
    if clash:
        raise DeclarationError(
            "params", f"param {clash[0]!r} is reserved: :{clash[0]} is {RESERVED_BINDS[clash[0]]}"
        )
    missing = [b for b in binds if b not in props and b not in RESERVED_BINDS]
    if missing:
        raise DeclarationError(
            "sql",
            f"names parameter :{missing[0]} that the params schema lacks (its"
            f" properties: {', '.join(sorted(props)) or 'none'})",
        )
    fmt = table.get("format", "csv")
    if not isinstance(fmt, str) or fmt.lower() not in FORMATS:
        raise DeclarationError("format", f"must be one of {', '.join(FORMATS)}")
    format_param = "format" in props
    if format_param:
        choices = props["format"].get("enum") if isinstance(props["format"], dict) else None
        if not isinstance(choices, list) or not choices or any(c not in FORMATS for c in choices):
            raise DeclarationError("params", f"a `format` param must be an enum of {', '.join(FORMATS)}")
    filename = table.get("filename", "")
    if not isinstance(filename, str) or (filename and not _FILENAME.match(filename)):
        raise DeclarationError("filename", "letters, digits, '.', '_' and '-' only (at most 100)")
    count_first = table.get("count_first", False)
    if not isinstance(count_first, bool):
        raise DeclarationError("count_first", "must be true or false")
    return SqlSpec(
        type_name=name,
        source=source,
        sql=sql,
        binds=binds,
        format=check_format(fmt),
        format_param=format_param,
        filename=filename,
        query_timeout_s=_number(table, "query_timeout_s"),
        max_rows=_number(table, "max_rows", integer=True),
        count_first=count_first,
        probe=tuple((b, "" if b == "tenant" else probe_value(props.get(b))) for b in binds),
    )


_planned: dict[tuple[str, str], bool] = {}  # (source URL, sql) the source already planned


async def check_sql_spec(spec: SqlSpec) -> None:
    """Have the source plan the SELECT (EXPLAIN, a sample value per param): SQL it refuses (syntax, an
    unknown column or table) is a DeclarationError; a source that cannot answer leaves it to the first run."""
    key = (repository.source_url(spec.source).render_as_string(hide_password=False), spec.sql)
    if key in _planned:
        return
    try:
        await asyncio.wait_for(
            repository.explain(spec.source, spec.sql, dict(spec.probe), EXPLAIN_LIMIT_S),
            EXPLAIN_LIMIT_S + FENCE_S,
        )
    except repository.SqlError as exc:
        raise DeclarationError("sql", f"the data source refused it: {exc}") from None
    except Exception as exc:
        log.warning(
            "SQL report type not checked against its source (checked when it runs)",
            extra={"report_type": spec.type_name, "source": spec.source, "error": str(exc)[:300]},
        )
        return
    _planned[key] = True


def query_limit_s(spec: SqlSpec) -> float:
    """The query's time limit: the type's `query_timeout_s`, else 90 % of the attempt's."""
    if spec.query_timeout_s is not None:
        return float(spec.query_timeout_s)
    rtype = registry.get(spec.type_name)
    attempt_s = (rtype.timeout_s if rtype is not None else None) or get_settings().job_timeout_s
    return DEFAULT_QUERY_SHARE * attempt_s


def row_limit(spec: SqlSpec) -> int:
    cap = get_settings().sql_report_max_rows
    return min(spec.max_rows, cap) if spec.max_rows is not None else cap


def binds_of(ctx: ReportContext, spec: SqlSpec, values: dict[str, Any]) -> dict[str, Any]:
    """Each `:name` of the SQL and its value: the job's own for the reserved names, else its params'."""
    fired = ctx.scheduled_for.astimezone(UTC).replace(tzinfo=None) if ctx.scheduled_for else None
    own = {"tenant": ctx.tenant, "scheduled_for": fired}
    return {name: own[name] if name in RESERVED_BINDS else values.get(name) for name in spec.binds}


async def run_sql_report(ctx: ReportContext, spec: SqlSpec, values: dict[str, Any]) -> int:
    """Run the SELECT and stream its rows to the output; returns the rows written."""
    binds = binds_of(ctx, spec, values)
    fmt = str(values["format"]) if spec.format_param and values.get("format") else spec.format
    limit_s, max_rows = query_limit_s(spec), row_limit(spec)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s + FENCE_S
    try:
        async with repository.read_only_connection(spec.source, limit_s) as conn:
            async with asyncio.timeout_at(deadline):
                total = await repository.count(conn, spec.sql, binds) if spec.count_first else None
                if total is not None and total > max_rows:
                    raise PermanentError(f"the query returns {total} rows, more than the limit of {max_rows}")
                result = await repository.stream(conn, spec.sql, binds)
            async with ctx.rows_writer(
                list(result.keys()), fmt, spec.filename or spec.type_name, expected_rows=total
            ) as out:
                async with asyncio.timeout_at(deadline):
                    async for part in result.partitions(FETCH_ROWS):
                        if out.rows + len(part) > max_rows:
                            raise PermanentError(f"the query returned more than the limit of {max_rows} rows")
                        await out.write_chunk(part)
                        if out.rows % LOG_EVERY_ROWS < len(part):
                            log.info("SQL report rows", extra={"job_id": ctx.job_id, "rows": out.rows})
                    await result.close()
            return out.rows
    except TimeoutError:
        raise repository.QueryTimedOut(
            f"the query ran past its {limit_s:g} s limit (stopped by the worker)"
        ) from None
    except (PermanentError, repository.SourceUnavailable, repository.QueryTimedOut):
        raise
    except Exception as exc:
        if _is_driver_error(exc):
            raise repository.classify(exc, limit_s) from exc
        raise


def _is_driver_error(exc: BaseException) -> bool:
    module = type(getattr(exc, "orig", None) or exc).__module__
    return module.split(".")[0] in ("sqlalchemy", "asyncmy", "aiomysql", "pymysql", "sqlite3", "aiosqlite")


def sql_report(spec: SqlSpec) -> ReportFn:
    """The report function of a declared SQL type."""

    async def run(ctx: ReportContext, params: DeclaredParams) -> None:
        await run_sql_report(ctx, spec, params.values())

    run.__name__ = run.__qualname__ = f"sql_report[{spec.type_name}]"
    return run
