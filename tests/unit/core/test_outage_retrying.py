"""The bounded retry of writes that record something already done: outages are ridden out, bugs are not."""

from __future__ import annotations

import time

import pytest
from sqlalchemy.exc import OperationalError, ProgrammingError

from app.core.db import outage_retrying


def error(cls: type[Exception], code: int, message: str) -> Exception:
    return cls("UPDATE alert_deliveries", {}, Exception(code, message))


async def run(failures: list[Exception], for_s: float) -> int:
    """Run a block that raises `failures` in turn, then succeeds; returns how many times it ran."""
    runs = 0
    async for attempt in outage_retrying(for_s, max_wait_s=0.05):
        with attempt:
            runs += 1
            if failures:
                raise failures.pop(0)
    return runs


async def test_a_refused_connection_is_retried_until_the_database_answers() -> None:
    gone = [error(OperationalError, 2003, "Can't connect"), error(OperationalError, 2013, "Lost connection")]
    assert await run(gone, for_s=5) == 3


async def test_a_sql_bug_is_raised_at_once() -> None:
    bug = error(ProgrammingError, 1054, "Unknown column 'x'")
    with pytest.raises(ProgrammingError):
        await run([bug, bug], for_s=5)


async def test_an_outage_longer_than_the_bound_is_raised() -> None:
    began = time.monotonic()
    with pytest.raises(OperationalError):
        await run([error(OperationalError, 2003, "Can't connect")] * 1000, for_s=0.3)
    assert time.monotonic() - began < 2
