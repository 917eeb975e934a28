"""Recording an attempt's outcome retries a database outage, and only an outage."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import OperationalError, ProgrammingError

from app.attempts import runner
from app.attempts.runner import RunResult, record_retrying


def _mysql_error(code: int, message: str, cls: type[Exception] = OperationalError) -> Exception:
    return cls("UPDATE report_jobs …", {}, Exception(code, message))  # type: ignore[call-arg]


async def _attempts_until_raised(exc: Exception) -> int:
    tries = 0
    with pytest.raises(type(exc)):
        async for attempt in record_retrying():
            with attempt:
                tries += 1
                if tries < 3:
                    raise exc
                return tries
    return tries


async def test_an_unknown_column_is_raised_at_once_not_retried_for_minutes() -> None:
    assert await _attempts_until_raised(_mysql_error(1054, "Unknown column 'x' in 'field list'")) == 1


async def test_a_sql_syntax_error_is_raised_at_once() -> None:
    assert (
        await _attempts_until_raised(_mysql_error(1064, "You have an error in your SQL", ProgrammingError))
        == 1
    )


async def test_a_lost_connection_is_retried_until_it_comes_back() -> None:
    tries = 0
    async for attempt in record_retrying():
        with attempt:
            tries += 1
            if tries < 3:
                raise _mysql_error(2013, "Lost connection to MySQL server during query")
    assert tries == 3


async def test_an_outcome_recorded_at_the_first_try_builds_no_retry_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_loop() -> None:
        raise AssertionError("the retry loop was built for an outcome recorded at once")

    monkeypatch.setattr(runner, "record_retrying", no_loop)
    calls: list[int] = []

    async def record() -> RunResult:
        calls.append(1)
        return RunResult(detail="done")

    assert await runner._recorded(record) == RunResult(detail="done")
    assert calls == [1]


async def test_an_outage_at_the_first_try_falls_into_the_retry_loop() -> None:
    failures = [_mysql_error(2013, "Lost connection to MySQL server during query")] * 2
    calls: list[int] = []

    async def record() -> RunResult:
        calls.append(1)
        if failures:
            raise failures.pop()
        return RunResult(detail="done")

    assert await runner._recorded(record) == RunResult(detail="done")
    assert len(calls) == 3


async def test_a_bug_at_the_first_try_is_raised_at_once() -> None:
    calls: list[int] = []

    async def record() -> RunResult:
        calls.append(1)
        raise _mysql_error(1054, "Unknown column 'x' in 'field list'")

    with pytest.raises(OperationalError):
        await runner._recorded(record)
    assert calls == [1]
