"""Declared report types in real processes: a worker picks up a changed REPORT_TYPES_FILE by itself (poll), an
API that does not poll picks it up on SIGHUP (and is not stopped by it), and a broken file keeps the types."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import httpx
import pytest

from tests.utils.declared import csv_rows, sql_type, sqlite_source, write_file
from tests.utils.jobs import wait_job
from tests.utils.polling import eventually
from tests.utils.stack import Stack

pytestmark = pytest.mark.timeout(120)


def one(name: str) -> str:
    return sql_type(
        name, "SELECT region, COUNT(*) AS n FROM sales GROUP BY region ORDER BY region", source="local"
    )


async def listed(client: httpx.AsyncClient) -> set[str]:
    resp = await client.get("/v1/report-types")
    assert resp.status_code == 200, resp.text
    return {t["name"] for t in resp.json()}


async def run_to_done(client: httpx.AsyncClient, report_type: str) -> list[list[str]]:
    resp = await client.post("/v1/jobs", json={"report_type": report_type, "params": {}})
    assert resp.status_code == 202, resp.text
    job = await wait_job(client, None, resp.json()["id"])
    assert job["status"] == "done", job
    output = await client.get(job["output"]["url"])
    return csv_rows(output.content)


async def test_processes_pick_up_a_changed_file_by_poll_or_sighup_and_keep_it_when_broken(
    stack: Stack, tmp_path: Path
) -> None:
    path = write_file(tmp_path / "report-types.toml", one("sql.a"))
    sources = json.dumps({"local": sqlite_source(tmp_path / "local.db", rows=70)})
    stack.overrides.update(REPORT_TYPES_FILE=str(path), DATA_SOURCES=sources)
    api = stack.start_api(REPORT_TYPES_POLL_S="0")  # SIGHUP only
    stack.start_worker(REPORT_TYPES_POLL_S="0.2")
    async with stack.client() as client:
        assert "sql.a" in await listed(client)
        assert (await run_to_done(client, "sql.a"))[1] == ["r0", "10"]

        write_file(path, one("sql.a") + one("sql.b"))
        api.send(signal.SIGHUP)
        await eventually(lambda: _has(client, "sql.b"), 10, "the API reloads on SIGHUP", 0.1)
        assert api.alive
        assert len(await run_to_done(client, "sql.b")) == 8  # the worker saw it by polling

        write_file(path, one("sql.a") + one("sql.b").replace("FROM sales", "FROM nowhere"))
        api.send(signal.SIGHUP)

        async def refused() -> bool:
            resp = await client.get("/v1/report-types/declarations")
            return resp.json()["error"] is not None

        await eventually(refused, 10, "the broken file is refused", 0.1)
        status = (await client.get("/v1/report-types/declarations")).json()
        assert status["error"]["type"] == "sql.b" and "no such table: nowhere" in status["error"]["reason"]
        assert {t["name"] for t in status["types"]} == {"sql.a", "sql.b"}
        assert len(await run_to_done(client, "sql.b")) == 8  # kept by the API and by the worker


async def _has(client: httpx.AsyncClient, name: str) -> bool:
    return name in await listed(client)
