"""The pool pings a connection only after it sat idle (`PING_AFTER_IDLE_S`) against real MariaDB: a connection
the server dropped while it was idle is replaced before anyone uses it; one in use a moment ago is not pinged
(a statement on it that finds it dead is an outage, and the next checkout gets a fresh connection)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine

from app.core import db
from app.core.config import get_settings
from app.core.db import is_db_outage, session_scope


async def connection_id() -> int:
    async with session_scope() as session:
        return int((await session.execute(text("SELECT CONNECTION_ID()"))).scalar_one())


async def kill(victim: int) -> None:
    other = create_async_engine(get_settings().database_url.get_secret_value())
    try:
        async with other.connect() as conn:
            await conn.execute(text(f"KILL CONNECTION {victim}"))
    finally:
        await other.dispose()


async def test_a_connection_dropped_while_idle_is_replaced_before_use(env: Any) -> None:
    victim = await connection_id()
    await kill(victim)
    await asyncio.sleep(db.PING_AFTER_IDLE_S + 0.2)
    assert await connection_id() != victim  # no error: the ping found it dead and the pool reconnected


async def test_a_connection_used_a_moment_ago_is_not_pinged_and_fails_as_an_outage(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db, "PING_AFTER_IDLE_S", 60.0)
    victim = await connection_id()
    await kill(victim)
    with pytest.raises(DBAPIError) as raised:
        await connection_id()
    assert is_db_outage(raised.value)
    assert await connection_id() != victim
