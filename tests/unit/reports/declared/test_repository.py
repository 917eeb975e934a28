"""Data sources: the URL a source is opened with (SQLite read-only, MySQL through the driver that streams
with backpressure) and how a driver's error is sorted: permanent SqlError, retryable timeout or outage."""

from __future__ import annotations

import sqlite3

import pytest
from pymysql.err import OperationalError, ProgrammingError

from app.reports.declared import repository


def test_a_sqlite_file_is_opened_read_only() -> None:
    url = repository.read_only_url("sqlite+aiosqlite:///./var/reports.db")
    assert url.database == "file:./var/reports.db?mode=ro" and url.query["uri"] == "true"


def test_a_mysql_source_is_read_through_aiomysql_whatever_its_url_names() -> None:
    url = repository.read_only_url("mysql+asyncmy://ro:pw@dw:3306/sales")
    assert url.drivername == "mysql+aiomysql" and (url.host, url.database) == ("dw", "sales")


@pytest.mark.parametrize(
    ("raw", "reason"),
    [("postgresql+asyncpg://x/y", "is not supported"), ("not a url", "not a database URL")],
)
def test_an_unusable_url_says_why(raw: str, reason: str) -> None:
    assert reason in (repository.check_url(raw) or "")


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (ProgrammingError(1064, "You have an error in your SQL syntax"), repository.SqlError),
        (OperationalError(1054, "Unknown column 'x' in 'field list'"), repository.SqlError),
        (OperationalError(1792, "Cannot execute statement in a READ ONLY transaction"), repository.SqlError),
        (
            OperationalError(1969, "Query execution was interrupted (max_statement_time exceeded)"),
            repository.QueryTimedOut,
        ),
        (OperationalError(3024, "maximum statement execution time exceeded"), repository.QueryTimedOut),
        (
            OperationalError(2013, "Lost connection to MySQL server during query"),
            repository.SourceUnavailable,
        ),
        (OperationalError(1213, "Deadlock found"), repository.SourceUnavailable),
        (sqlite3.OperationalError("no such column: x"), repository.SqlError),
        (sqlite3.OperationalError("interrupted"), repository.QueryTimedOut),
        (sqlite3.OperationalError("database is locked"), repository.SourceUnavailable),
        (ConnectionResetError("reset by peer"), repository.SourceUnavailable),
    ],
)
def test_driver_errors_are_sorted_into_permanent_and_retryable(error: Exception, kind: type) -> None:
    sorted_error = repository.classify(error, 2.0)
    assert isinstance(sorted_error, kind), sorted_error
    code = error.args[0] if isinstance(error.args[0], int) else None
    assert (f"({code}) " if code else "") + str(error.args[-1]) in str(sorted_error)
