"""The one alembic migration upgrades, checks clean and downgrades on MariaDB (asyncmy) and SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.servers import MariaDBServer
from tests.utils.database import alembic


def round_trip(url: str) -> None:
    for args in (("upgrade", "head"), ("check",), ("downgrade", "base"), ("upgrade", "head"), ("check",)):
        result = alembic(url, *args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)


def test_migration_round_trips_on_sqlite(tmp_path: Path) -> None:
    round_trip(f"sqlite+aiosqlite:///{tmp_path / 'reports.db'}")


@pytest.mark.timeout(300)
def test_migration_round_trips_on_mariadb(mariadb: MariaDBServer) -> None:
    mariadb.sql("DROP DATABASE IF EXISTS migration_check; CREATE DATABASE migration_check")
    round_trip(mariadb.url.rsplit("/", 1)[0] + "/migration_check")
