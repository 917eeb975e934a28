"""The data sources of SQL report types (DATA_SOURCES): read-only connections with the statement time limit
set in the database, the user's SELECT streamed through a server-side cursor, and the driver's errors sorted.

The only module that talks to those databases; the user's SQL is data here, always run with bound values.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import lru_cache
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, InterfaceError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncResult, create_async_engine
from sqlalchemy.pool import NullPool

from app.core.config import get_settings
from app.reports.base import PermanentError

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10
SQLITE_CHECK_EVERY_OPS = 10_000  # SQLite's progress handler: how often a running query checks its deadline
# MySQL/MariaDB: the statement time limit ended it (MariaDB 1969, MySQL 3024) or it was interrupted (1317).
TIMEOUT_CODES = {1969, 3024, 1317, 1028}
# Server-side conditions that pass (too many connections, lock waits, deadlocks, shutdown, killed).
PASSING_CODES = {1040, 1053, 1203, 1205, 1213, 1226, 1927, 1158, 1159, 1160, 1161}
SQLITE_PASSING = ("database is locked", "database table is locked", "unable to open", "disk i/o", "busy")


class UnknownSource(KeyError):
    """A type names a data source DATA_SOURCES does not have."""


class SourceUnavailable(Exception):
    """The source could not be reached (or dropped the connection): retryable."""


class QueryTimedOut(Exception):
    """The query's time limit ended it (the database's message when the database stopped it): retryable."""


class SqlError(PermanentError):
    """The database refused the SQL (syntax, an unknown column or table, a write in a read-only
    transaction …): retrying cannot help, the job is dead after this attempt with the database's message."""


def source_names() -> list[str]:
    return sorted(get_settings().data_sources)


def source_url(name: str) -> URL:
    secret = get_settings().data_sources.get(name)
    if secret is None:
        raise UnknownSource(name)
    return read_only_url(secret.get_secret_value())


def read_only_url(raw: str) -> URL:
    """The URL as we open it: a SQLite file in `mode=ro` (the database refuses every write); a MySQL one
    through aiomysql (its sessions are made read-only when opened, see `_prepare`).

    Why aiomysql for MySQL sources even when the URL names asyncmy: a report streams through an unbuffered
    cursor, and only a driver that stops reading the socket while the report writes keeps memory flat.
    asyncmy 0.2.18 receives the whole result into its buffer as fast as the server sends it (1,000,000
    rows: ~500 MB); aiomysql reads through asyncio's StreamReader, which pauses the socket at 128 KiB."""
    url = make_url(raw)
    if url.drivername == "mysql+asyncmy":
        return url.set(drivername="mysql+aiomysql")
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return url
    if url.database.startswith("file:") or url.query.get("mode"):
        return url
    return url.set(database=f"file:{url.database}?mode=ro", query={**url.query, "uri": "true"})


def check_url(raw: str) -> str | None:
    """Why a DATA_SOURCES URL cannot be used (None: it can): SQLAlchemy's async MySQL or SQLite drivers."""
    try:
        url = make_url(raw)
    except ArgumentError as exc:
        return f"not a database URL ({exc})"
    if url.drivername not in ("mysql+asyncmy", "mysql+aiomysql", "sqlite+aiosqlite"):
        return f"driver {url.drivername!r} is not supported (mysql+asyncmy, sqlite+aiosqlite)"
    return None


@lru_cache(maxsize=32)
def _engine(url: str) -> AsyncEngine:
    """One engine per source URL, without a pool: a report holds its connection for minutes and a broken
    one (a timeout, a cancel mid-stream) is closed, never handed to the next report."""
    parsed = make_url(url)
    args: dict[str, Any] = {"timeout": 30} if parsed.get_backend_name() == "sqlite" else {}
    if parsed.get_backend_name() == "mysql":
        args["connect_timeout"] = CONNECT_TIMEOUT_S
    return create_async_engine(parsed, poolclass=NullPool, connect_args=args)


async def dispose_engines() -> None:
    """Forget the sources' engines (tests change DATA_SOURCES between runs)."""
    _engine.cache_clear()


def classify(exc: BaseException, limit_s: float | None = None) -> Exception:
    """The error a report raises for a driver's: SqlError (permanent) for SQL the database refused,
    QueryTimedOut for a time limit, SourceUnavailable for anything about reaching the database."""
    orig = getattr(exc, "orig", None) or exc
    args: tuple[Any, ...] = tuple(getattr(orig, "args", ()))
    code = args[0] if args and isinstance(args[0], int) else None
    message = str(args[1]) if code is not None and len(args) > 1 else str(orig)
    shown = f"({code}) {message}" if code is not None else message
    if code in TIMEOUT_CODES or (isinstance(orig, sqlite3.OperationalError) and message == "interrupted"):
        limit = f" (limit {limit_s:g} s)" if limit_s is not None else ""
        return QueryTimedOut(f"{shown}{limit}")
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return SourceUnavailable(shown)
    if isinstance(orig, sqlite3.Error):
        if isinstance(orig, sqlite3.OperationalError) and any(p in message.lower() for p in SQLITE_PASSING):
            return SourceUnavailable(shown)
        return SqlError(shown)
    if code is not None and (code in PASSING_CODES or 2000 <= code < 3000):
        return SourceUnavailable(shown)  # 2xxx: the client's own errors (cannot connect, server gone)
    if code is not None:
        return SqlError(shown)
    if isinstance(exc, DBAPIError | InterfaceError | OSError | ConnectionError | TimeoutError):
        return SourceUnavailable(shown or type(orig).__name__)
    return exc if isinstance(exc, Exception) else SourceUnavailable(repr(exc))


async def _prepare(conn: AsyncConnection, limit_s: float) -> int | None:
    """Make the session read-only and give its statements `limit_s` in the database itself; returns the
    MySQL connection id (what `KILL QUERY` names), None on SQLite."""
    dialect = conn.dialect
    if dialect.name == "sqlite":
        await conn.exec_driver_sql("PRAGMA query_only = ON")
        deadline = time.monotonic() + limit_s
        raw = await conn.get_raw_connection()
        # Runs on aiosqlite's thread: a non-zero answer interrupts the statement ("interrupted").
        await raw.driver_connection.set_progress_handler(  # type: ignore[union-attr]
            lambda: int(time.monotonic() > deadline), SQLITE_CHECK_EVERY_OPS
        )
        return None
    await conn.exec_driver_sql("SET SESSION TRANSACTION READ ONLY")
    if getattr(dialect, "is_mariadb", False):
        await conn.exec_driver_sql(f"SET SESSION max_statement_time = {float(limit_s):.3f}")
    else:
        await conn.exec_driver_sql(f"SET SESSION max_execution_time = {max(1, round(limit_s * 1000))}")
    thread_id = (await conn.exec_driver_sql("SELECT CONNECTION_ID()")).scalar_one()
    await conn.exec_driver_sql("START TRANSACTION READ ONLY")
    return int(thread_id)


async def _kill_query(engine: AsyncEngine, thread_id: int) -> None:
    """Stop a statement whose reader went away (a cancel, our own time limit): closing the socket alone
    leaves MySQL computing until it next writes. A user may always kill its own connections' queries."""
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            async with engine.connect() as conn:
                await conn.exec_driver_sql(f"KILL QUERY {int(thread_id)}")
    except Exception as exc:
        log.warning("could not stop a SQL report's query", extra={"thread_id": thread_id, "error": repr(exc)})


@asynccontextmanager
async def read_only_connection(source: str, limit_s: float) -> AsyncIterator[AsyncConnection]:
    """A connection to `source`, read-only, whose statements the database stops after `limit_s`. Ended by
    an error or a cancel, its statement is killed and it is closed without reading the rest of a result."""
    engine = _engine(source_url(source).render_as_string(hide_password=False))
    try:
        conn = await engine.connect()
    except Exception as exc:
        raise SourceUnavailable(f"cannot connect to data source {source!r}: {classify(exc)}") from exc
    thread_id: int | None = None
    try:
        thread_id = await _prepare(conn, limit_s)
        yield conn
    except BaseException:
        if thread_id is not None:
            await asyncio.shield(_kill_query(engine, thread_id))
        with contextlib.suppress(Exception):
            await asyncio.shield(conn.invalidate())
        raise
    finally:
        with contextlib.suppress(Exception):
            await asyncio.shield(conn.close())


async def stream(conn: AsyncConnection, sql: str, binds: Mapping[str, Any]) -> AsyncResult:
    """The SELECT through a server-side cursor; its values bound, never formatted into the text."""
    return await conn.stream(text(sql), dict(binds))


async def count(conn: AsyncConnection, sql: str, binds: Mapping[str, Any]) -> int:
    """How many rows the SELECT returns (a type's `count_first`), in the same read-only transaction."""
    result = await conn.execute(text(f"SELECT COUNT(*) FROM (\n{sql}\n) AS counted"), dict(binds))
    return int(result.scalar_one())


async def explain(source: str, sql: str, binds: Mapping[str, Any], limit_s: float) -> None:
    """Have the source plan the SELECT without running it: raises SqlError for SQL it refuses,
    SourceUnavailable or QueryTimedOut when it cannot say."""
    prefix = "EXPLAIN QUERY PLAN" if source_url(source).get_backend_name() == "sqlite" else "EXPLAIN"
    try:
        async with read_only_connection(source, limit_s) as conn:
            await conn.execute(text(f"{prefix} {sql}"), dict(binds))
    except (SourceUnavailable, QueryTimedOut, SqlError):
        raise
    except Exception as exc:
        raise classify(exc, limit_s) from exc
