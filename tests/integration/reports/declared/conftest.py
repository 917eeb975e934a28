"""Declared report types against the test MariaDB: a `dw` database (read-only user) and a SQLite file as
data sources, and a report-types file the test writes; everything declared is forgotten afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devtools.servers import MariaDBServer
from tests.utils.declared import mariadb_source, sqlite_source, write_file

DW_ROWS = 20_000


@dataclass
class Declared:
    """`await declared.use(text)`: write the report-types file and load it as a process starting would."""

    env: Any
    path: Path
    sources: dict[str, str]
    mariadb: MariaDBServer

    async def use(self, text: str, **settings: Any) -> None:
        import json

        from app.reports.declared import declarations

        write_file(self.path, text)
        await self.env.set(REPORT_TYPES_FILE=self.path, DATA_SOURCES=json.dumps(self.sources), **settings)
        assert declarations.load_now(force=True) is True, declarations.status.error


@pytest.fixture(scope="session")
def dw_url(mariadb: MariaDBServer) -> str:
    return mariadb_source(mariadb, DW_ROWS)


@pytest.fixture
async def declared(env: Any, mariadb: MariaDBServer, dw_url: str, tmp_path: Path) -> AsyncIterator[Declared]:
    from app.reports.declared import declarations
    from app.reports.declared.repository import dispose_engines

    sources = {"dw": dw_url, "local": sqlite_source(tmp_path / "local.db", rows=DW_ROWS)}
    yield Declared(env, tmp_path / "report-types.toml", sources, mariadb)
    declarations.forget()
    await dispose_engines()
