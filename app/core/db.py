"""Database engine and sessions: one engine per process, SQLite tuned for several processes.

`session_scope()` commits on success and rolls back on error; `is_db_outage()` tells an outage from a bug, and
`outage_retrying()` rides out the former for a bounded time.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from tenacity import AsyncRetrying, retry_if_exception, stop_after_delay, wait_exponential

from app.core import tracing
from app.core.config import Settings, get_settings

_engine: AsyncEngine | None = None
_autocommit_engine: AsyncEngine | None = None
_sessionmaker: async_sessionmaker[AsyncSession] | None = None


# A pooled connection that sat idle this long is pinged before it is handed out (a restarted or timed-out
# server's connections are replaced there); one in use a moment ago is not: pinging every checkout cost a
# round trip per transaction, and a connection that breaks anyway fails its statement as an outage, retried.
PING_AFTER_IDLE_S = 1.0


def create_engine(settings: Settings, process_name: str = "app", autocommit: bool = False) -> AsyncEngine:
    """The process's engine; `autocommit`: a second, small one whose connections commit each statement by
    itself (one round trip instead of the statement and a COMMIT; MySQL only, see `app.core.driver`)."""
    url = settings.database_url.get_secret_value()
    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"timeout": 30}
    else:
        kwargs.update(
            pool_size=2 if autocommit else settings.db_pool_size,
            max_overflow=settings.db_pool_size,
            pool_recycle=1800,
            # The most recently used connection first: a busy process keeps reusing the few it needs (warm,
            # never idle long enough to need the ping below); the rest idle, and are pinged when next used.
            pool_use_lifo=True,
            pool_timeout=10,
            isolation_level="AUTOCOMMIT" if autocommit else "READ COMMITTED",
            # session_scope() always ends its transaction: the pool's extra ROLLBACK round trip buys nothing.
            pool_reset_on_return=None,
            connect_args={"connect_timeout": 5},
        )
    engine = create_async_engine(url, **kwargs)
    if url.startswith("sqlite"):
        _install_sqlite_pragmas(engine)
    else:
        _install_idle_ping(engine)
    return engine


def _install_idle_ping(engine: AsyncEngine) -> None:
    """`pool_pre_ping`, for connections idle `PING_AFTER_IDLE_S` or more (SQLAlchemy's pool events)."""
    pool = engine.sync_engine.pool

    @event.listens_for(pool, "checkin")
    def _on_checkin(_dbapi_conn: Any, record: Any) -> None:
        if record is not None:
            record.info["idle_since"] = time.monotonic()

    @event.listens_for(pool, "checkout")
    def _on_checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_S:
            return  # new, or in use a moment ago
        try:
            # The driver's own ping (`dialect.do_ping` first imports PyMySQL to see how PyMySQL pings).
            dbapi_conn.ping(False)
        except Exception as exc:
            raise DisconnectionError("the pooled connection did not answer a ping") from exc


def _install_sqlite_pragmas(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        # Take the write lock up front so concurrent writers queue on busy_timeout instead of failing.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def get_engine() -> AsyncEngine:
    global _engine, _sessionmaker
    if _engine is None:
        _engine = create_engine(get_settings())
        tracing.instrument_engine(_engine.sync_engine)
        _sessionmaker = async_sessionmaker(_engine, expire_on_commit=False)
    return _engine


def get_autocommit_engine() -> AsyncEngine:
    global _autocommit_engine
    if _autocommit_engine is None:
        _autocommit_engine = create_engine(get_settings(), autocommit=True)
    return _autocommit_engine


def get_sessionmaker() -> async_sessionmaker[AsyncSession]:
    get_engine()
    assert _sessionmaker is not None
    return _sessionmaker


@asynccontextmanager
async def session_scope() -> AsyncIterator[AsyncSession]:
    async with get_sessionmaker()() as session:
        try:
            yield session
            await session.commit()
        except BaseException:
            await session.rollback()
            raise


@asynccontextmanager
async def snapshot_scope() -> AsyncIterator[AsyncSession]:
    """A session whose reads all see one snapshot (REPEATABLE READ on MySQL, where sessions otherwise read
    committed data afresh each statement): for reads that must agree with each other, such as the ranges
    and the scan bound of one job-list page while workers move jobs between statuses."""
    async with session_scope() as session:
        if session.get_bind().dialect.name != "sqlite":
            await session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        yield session


async def dispose_engine() -> None:
    global _engine, _autocommit_engine, _sessionmaker
    for engine in (_engine, _autocommit_engine):
        if engine is not None:
            await engine.dispose()
    _engine = _autocommit_engine = None
    _sessionmaker = None


async def ping() -> None:
    """One round trip to the database (readiness)."""
    async with session_scope() as session:
        await session.execute(text("SELECT 1"))


# MySQL client/server codes that mean "cannot talk to the database right now" (1927: MariaDB killed this
# connection, e.g. while shutting down).
OUTAGE_CODES = frozenset({1040, 1053, 1205, 1213, 1927, 2002, 2003, 2005, 2006, 2013, 2055})


def is_db_outage(exc: BaseException) -> bool:
    """True for a lost or refused connection, a full pool, a deadlock or lock wait: worth retrying. False for
    SQL and schema bugs (an unknown column is error 1054): retrying those only loops."""
    if isinstance(exc, PoolTimeoutError | ConnectionError | OSError):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        args = getattr(exc.orig, "args", ())
        if args and isinstance(args[0], int):
            return args[0] in OUTAGE_CODES
        return isinstance(exc, OperationalError)  # SQLite "database is locked" and drivers without codes
    return False


LOCK_CONFLICT_CODES = frozenset({1205, 1213})  # lock wait timeout, deadlock


def is_lock_conflict(exc: BaseException) -> bool:
    """A deadlock or lock wait: another transaction was in the way, the database itself is fine."""
    args: tuple[Any, ...] = getattr(getattr(exc, "orig", None), "args", ())
    return isinstance(exc, DBAPIError) and bool(args) and args[0] in LOCK_CONFLICT_CODES


def outage_retrying(for_s: float, max_wait_s: float = 5.0) -> AsyncRetrying:
    """Retries a block while the database is unreachable (0.1, 0.2, 0.4 … `max_wait_s` s apart), for about
    `for_s` seconds plus the last try; then, or at once for a SQL or schema bug, the error is raised.

    For writes that record something already done outside (an outcome, a sent alert, a delivered callback):
    `async for attempt in outage_retrying(30): with attempt: ...`. Make the block safe to run twice: a commit
    whose answer was lost may have landed.
    """
    return AsyncRetrying(
        retry=retry_if_exception(is_db_outage),
        wait=wait_exponential(multiplier=0.1, max=max_wait_s),
        stop=stop_after_delay(for_s),
        reraise=True,
    )
