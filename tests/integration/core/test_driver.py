"""Statements run on the MySQL driver's own connection (`app.core.driver`) against real MariaDB: the same
values in and out as through the ORM session, a failed block rolls back, and a driver error is SQLAlchemy's
own error — a lost connection an outage, dropped from the pool, the next transaction on a fresh one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Integer, bindparam, insert, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from app.core.db import is_db_outage, session_scope
from app.core.driver import SessionStatements, driver_autocommit, driver_path_enabled, driver_transaction
from app.core.repository import table_of
from app.core.states import JobStatus
from app.models import ReportJob

JOBS = table_of(ReportJob)
BY_ID = select(JOBS).where(JOBS.c.id == bindparam("job_id"))
INSERT_JOB = insert(JOBS)
SET_STATUS = JOBS.update().where(JOBS.c.id == bindparam("job_id")).values(status=bindparam("status"))
CONNECTION_ID = text("SELECT CONNECTION_ID() AS id").columns(id=Integer)
NOW = datetime(2026, 11, 24, 1, 2, 3, 456000, tzinfo=UTC)


def job_row(job_id: str) -> dict[str, Any]:
    return {
        "id": job_id,
        "tenant": "acme",
        "report_type": "demo.csv",
        "params": {"rows": 3, "title": "ünïcode"},
        "status": JobStatus.PENDING,
        "attempt": 0,
        "max_attempts": 4,
        "timeout_s": 60,
        "priority": 5,
        "replay_count": 0,
        "attempts_total": 0,
        "cancel_requested": False,
        "on_predecessor_dead": "wait",
        "callback_attempts": 0,
        "progress": 0.0,
        "created_at": NOW,
        "updated_at": NOW,
        "run_at": NOW,
    }


async def test_the_driver_path_is_the_one_taken_on_mariadb(env: Any) -> None:
    assert driver_path_enabled()


async def test_values_go_in_and_come_out_as_through_the_session(env: Any) -> None:
    async with driver_transaction() as tx:
        assert await tx.insert_many(INSERT_JOB, [job_row("d-1"), job_row("d-2")]) == 2
        driven = (await tx.execute(BY_ID, {"job_id": "d-1"})).rows
    async with session_scope() as session:
        through_session = (await SessionStatements(session).execute(BY_ID, {"job_id": "d-1"})).rows
    assert driven == through_session
    row = driven[0]
    assert row["status"] is JobStatus.PENDING
    assert row["params"] == {"rows": 3, "title": "ünïcode"}
    assert row["created_at"] == NOW and row["created_at"].tzinfo is not None
    assert row["cancel_requested"] is False


async def test_an_update_reports_the_rows_it_matched(env: Any) -> None:
    async with driver_transaction() as tx:
        await tx.insert_many(INSERT_JOB, [job_row("d-1")])
        changed = await tx.execute(SET_STATUS, {"job_id": "d-1", "status": JobStatus.CANCELLED})
        missing = await tx.execute(SET_STATUS, {"job_id": "nope", "status": JobStatus.CANCELLED})
    assert (changed.rowcount, missing.rowcount) == (1, 0)


async def test_a_block_that_raises_is_rolled_back(env: Any) -> None:
    with pytest.raises(RuntimeError):
        async with driver_transaction() as tx:
            await tx.insert_many(INSERT_JOB, [job_row("d-1")])
            raise RuntimeError("the caller's own error")
    async with driver_transaction() as tx:
        assert (await tx.execute(BY_ID, {"job_id": "d-1"})).rows == []


async def test_an_insert_that_leaves_a_defaulted_column_out_is_refused_before_it_runs(env: Any) -> None:
    row = job_row("d-1")
    del row["callback_attempts"]
    with pytest.raises(ValueError, match="callback_attempts"):
        async with driver_transaction() as tx:
            await tx.insert_many(INSERT_JOB, [row])


async def test_a_driver_error_is_sqlalchemys_and_not_an_outage(env: Any) -> None:
    async with driver_transaction() as tx:
        await tx.insert_many(INSERT_JOB, [job_row("d-1")])
    with pytest.raises(IntegrityError) as raised:
        async with driver_transaction() as tx:
            await tx.insert_many(INSERT_JOB, [job_row("d-2"), job_row("d-1")])
    assert not is_db_outage(raised.value)
    async with driver_transaction() as tx:  # the duplicate's whole statement was rolled back
        assert (await tx.execute(BY_ID, {"job_id": "d-2"})).rows == []


async def test_a_killed_connection_is_an_outage_and_the_next_transaction_gets_a_fresh_one(env: Any) -> None:
    with pytest.raises(DBAPIError) as raised:
        async with driver_transaction() as tx:
            mine = (await tx.execute(CONNECTION_ID, {})).rows[0]["id"]
            async with session_scope() as other:
                await other.execute(text(f"KILL CONNECTION {int(mine)}"))
            await tx.execute(BY_ID, {"job_id": "d-1"})
    assert is_db_outage(raised.value) and raised.value.connection_invalidated
    async with driver_transaction() as tx:
        again = (await tx.execute(CONNECTION_ID, {})).rows[0]["id"]
        assert again != mine
        assert (await tx.execute(BY_ID, {"job_id": "d-1"})).rows == []


async def test_an_autocommit_statement_is_committed_alone_and_a_failed_one_leaves_nothing(env: Any) -> None:
    async with driver_autocommit() as tx:
        await tx.insert_many(INSERT_JOB, [job_row("d-1")])
        async with session_scope() as other:  # another connection sees it before the block ends
            seen = (await SessionStatements(other).execute(BY_ID, {"job_id": "d-1"})).rows
        assert [row["id"] for row in seen] == ["d-1"]
        with pytest.raises(IntegrityError):
            await tx.insert_many(INSERT_JOB, [job_row("d-2"), job_row("d-1")])
    async with driver_transaction() as tx:  # the failed statement's first row went with it
        assert (await tx.execute(BY_ID, {"job_id": "d-2"})).rows == []
