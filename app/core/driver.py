"""The worker's hottest transactions on the MySQL driver's own connection: a Core statement compiled once for
the engine's dialect, its parameters and rows converted by the columns' own types, no ORM, no greenlet.

SQLAlchemy spends ~0.15 ms of CPU a statement around a driver call that costs ~0.05 ms (compiled-cache
lookup, execution context, result set-up, greenlet switches): most of a no-op job's cost. The statements are
still SQLAlchemy constructs defined in the repositories; only their execution skips the layers. The
connection comes from (and goes back to) the engine's pool, which invalidates it on a disconnect as usual;
driver errors are raised as SQLAlchemy's own `DBAPIError`s, so `is_db_outage` tells them apart unchanged.
Only MySQL/MariaDB (asyncmy) take this path: `driver_path_enabled()`; other engines keep the ORM session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, NamedTuple, Protocol, cast

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.sql import ClauseElement, Executable
from sqlalchemy.sql.compiler import SQLCompiler

from app.core.db import get_autocommit_engine, get_engine

Processor = Callable[[Any], Any] | None


class Compiled:
    """One statement as the driver takes it: its SQL text, parameter names in placeholder order with their
    types' bind processors, and (a SELECT) its columns' result processors."""

    def __init__(self, stmt: ClauseElement, dialect: Dialect, column_keys: Sequence[str] = ()) -> None:
        compiled = cast(SQLCompiler, stmt.compile(dialect=dialect, column_keys=list(column_keys) or None))
        self.sql = compiled.string
        self._compiled = compiled
        self.names: tuple[str, ...] = tuple(compiled.positiontup or ())
        binds = compiled.binds
        defaulted = [name for name in self.names if column_keys and name not in column_keys]
        if defaulted:  # a column default is filled by SQLAlchemy's execution context, which this path skips
            raise ValueError(f"a driver INSERT takes every column it writes; missing {defaulted}")
        self.binds: list[Processor] = [binds[name].type.bind_processor(dialect) for name in self.names]
        selected = getattr(stmt, "selected_columns", None)
        self.columns: tuple[str, ...] = tuple(c.key for c in selected) if selected is not None else ()
        self.results: list[Processor] = (
            [c.type.result_processor(dialect, None) for c in selected] if selected is not None else []
        )

    def parameters(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """The positional parameters for `values` (literals in the statement filled in, types applied)."""
        try:  # every placeholder is a value given (an INSERT's columns): no need to merge in literals
            given = [values[name] for name in self.names]
        except KeyError:
            merged = cast(dict[str, Any], self._compiled.construct_params(dict(values)))
            given = [merged[name] for name in self.names]
        processed = zip(self.binds, given, strict=True)
        return tuple(value if proc is None else proc(value) for proc, value in processed)

    def row(self, raw: Sequence[Any]) -> dict[str, Any]:
        """A fetched row as {column key: value}, converted by each column's type."""
        return {
            key: value if proc is None else proc(value)
            for key, proc, value in zip(self.columns, self.results, raw, strict=True)
        }


class Result(NamedTuple):
    rowcount: int
    rows: list[dict[str, Any]]


class Statements(Protocol):
    """Where a repository of hot statements runs them: a driver transaction, or an ORM session's."""

    async def execute(self, stmt: ClauseElement, values: Mapping[str, Any]) -> Result: ...

    async def insert_many(self, stmt: ClauseElement, rows: Sequence[Mapping[str, Any]]) -> int: ...


class SessionStatements:
    """`Statements` in an ORM session's transaction (SQLite, or a batch that also needs the session), Core
    rows as dicts like the driver's."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def execute(self, stmt: ClauseElement, values: Mapping[str, Any]) -> Result:
        conn = await self.session.connection()
        result = await conn.execute(cast(Executable, stmt), dict(values))
        if result.returns_rows:
            rows = [dict(row._mapping) for row in result]
            return Result(len(rows), rows)
        return Result(int(result.rowcount), [])

    async def insert_many(self, stmt: ClauseElement, rows: Sequence[Mapping[str, Any]]) -> int:
        conn = await self.session.connection()
        await conn.execute(cast(Executable, stmt), [dict(row) for row in rows])
        return len(rows)


class DriverTransaction:
    """Statements run in one transaction on one driver connection; `driver_transaction()` commits it."""

    def __init__(self, driver: Any, dialect: Dialect) -> None:
        self._driver = driver
        self._dialect = dialect

    async def execute(self, stmt: ClauseElement, values: Mapping[str, Any]) -> Result:
        compiled = compile_once(stmt, self._dialect)
        params = compiled.parameters(values)
        async with self._driver.cursor() as cursor:
            try:
                count = await cursor.execute(compiled.sql, params)
                rows = [compiled.row(raw) for raw in await cursor.fetchall()] if compiled.columns else []
            except self._dialect.loaded_dbapi.Error as exc:
                raise self.error(compiled.sql, params, exc) from exc
        return Result(int(count or 0), rows)

    async def insert_many(self, stmt: ClauseElement, rows: Sequence[Mapping[str, Any]]) -> int:
        """One multi-row INSERT of `rows` (all with the same keys: the driver rewrites executemany)."""
        compiled = compile_once(stmt, self._dialect, tuple(rows[0]))
        params = [compiled.parameters(row) for row in rows]
        async with self._driver.cursor() as cursor:
            try:
                count = await cursor.executemany(compiled.sql, params)
            except self._dialect.loaded_dbapi.Error as exc:
                raise self.error(compiled.sql, params, exc) from exc
        return int(count or 0)

    def error(self, sql: str, params: Any, exc: Exception) -> DBAPIError:
        error = DBAPIError.instance(
            sql,
            params,
            exc,
            self._dialect.loaded_dbapi.Error,
            connection_invalidated=self._dialect.is_disconnect(cast(Any, exc), None, None),
            dialect=self._dialect,
        )
        return cast(DBAPIError, error)


def driver_path_enabled() -> bool:
    """True where the hot transactions run on the driver (MySQL/MariaDB through asyncmy)."""
    dialect = get_engine().dialect
    return dialect.name == "mysql" and dialect.driver == "asyncmy"


@asynccontextmanager
async def driver_transaction() -> AsyncIterator[DriverTransaction]:
    """A transaction on a pooled connection's driver: committed when the block ends, rolled back if it
    raises; a connection whose state is unknown (a disconnect, a cancelled statement) is invalidated."""
    engine = get_engine()
    async with engine.connect() as conn:
        driver = await _driver_of(conn)
        tx = DriverTransaction(driver, engine.dialect)
        try:
            yield tx
            try:
                await driver.commit()
            except engine.dialect.loaded_dbapi.Error as exc:
                raise tx.error("COMMIT", (), exc) from exc
        except BaseException as exc:
            await _roll_back(conn, driver, exc)
            raise


@asynccontextmanager
async def driver_autocommit() -> AsyncIterator[DriverTransaction]:
    """Statements on a pooled autocommit connection's driver: each commits by itself as it succeeds (for a
    write that is one statement, such as a multi-row INSERT: one round trip instead of two)."""
    engine = get_autocommit_engine()
    async with engine.connect() as conn:
        driver = await _driver_of(conn)
        try:
            yield DriverTransaction(driver, engine.dialect)
        except BaseException as exc:
            if _state_unknown(exc):
                await conn.invalidate()
            raise


async def _driver_of(conn: AsyncConnection) -> Any:
    driver = (await conn.get_raw_connection()).driver_connection
    assert driver is not None
    return driver


def _state_unknown(exc: BaseException) -> bool:
    """The connection may be mid-protocol or gone: cancelled, a socket error, or a disconnect."""
    if not isinstance(exc, Exception) or isinstance(exc, OSError):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


async def _roll_back(conn: AsyncConnection, driver: Any, exc: BaseException) -> None:
    if not _state_unknown(exc):
        try:
            await driver.rollback()
            return
        except Exception:  # the connection is no use now: dropped below, the first error is the one raised
            pass
    await conn.invalidate()


_compiled: dict[tuple[int, tuple[str, ...]], tuple[ClauseElement, Compiled]] = {}


def compile_once(stmt: ClauseElement, dialect: Dialect, column_keys: tuple[str, ...] = ()) -> Compiled:
    """`Compiled` for a long-lived statement (a module constant or a cached builder's), made at first use."""
    key = (id(stmt), column_keys)
    hit = _compiled.get(key)
    if hit is None or hit[0] is not stmt:  # the statement is held in the entry, so its id is not reused
        hit = (stmt, Compiled(stmt, dialect, column_keys))
        _compiled[key] = hit
    return hit[1]
