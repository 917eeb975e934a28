"""Which database errors count as an outage (503) and which are bugs (500)."""

from __future__ import annotations

from sqlalchemy.exc import OperationalError, ProgrammingError

from app.core.db import is_db_outage


def error(cls: type[Exception], code: int | None, message: str) -> Exception:
    orig = Exception(code, message) if code is not None else Exception(message)
    return cls("SELECT 1", {}, orig)  # type: ignore[call-arg]


def test_lost_or_refused_connections_are_outages() -> None:
    for code in (2003, 2006, 2013, 1040, 1927):
        assert is_db_outage(error(OperationalError, code, "gone"))
    assert is_db_outage(ConnectionRefusedError())


def test_schema_and_sql_mistakes_are_not_outages() -> None:
    assert not is_db_outage(error(OperationalError, 1054, "Unknown column 'x'"))
    assert not is_db_outage(error(ProgrammingError, 1064, "syntax"))
    assert not is_db_outage(ValueError("nope"))


def test_sqlite_busy_without_a_code_is_an_outage() -> None:
    assert is_db_outage(error(OperationalError, None, "database is locked"))
