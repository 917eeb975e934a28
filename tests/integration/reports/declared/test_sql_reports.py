"""SQL report types end to end on real MariaDB (a `dw` database, read-only user) and SQLite: submitted over
the API, run by arq workers, files read back; timeouts, bad SQL, injection and read-only sessions."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from app.reports.declared import repository
from tests.integration.reports.declared.conftest import DW_ROWS, Declared
from tests.utils.database import ROOT
from tests.utils.declared import csv_rows, sql_type, xlsx_rows
from tests.utils.jobs import get_attempts, get_job, submit_id
from tests.utils.keys import make_key
from tests.utils.workers import drain

SALES = "SELECT id, day, region, amount, note, at FROM sales ORDER BY id"
FORMAT_PARAM = {"format": {"enum": ["csv", "xlsx"], "default": "csv"}}


async def output(client: httpx.AsyncClient, auth: dict[str, str], job: dict[str, Any]) -> bytes:
    resp = await client.get(job["output"]["url"], headers=auth)
    assert resp.status_code == 200, resp.text
    return resp.content


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
async def test_a_20k_row_sql_report_streams_to_a_file_that_reads_back_whole(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared, fmt: str
) -> None:
    types = sql_type("dw.sales", SALES, params=FORMAT_PARAM, filename="sales", count_first=True, timeout_s=60)
    await declared.use(types)
    job_id = await submit_id(client, auth, "dw.sales", format=fmt)
    await drain()
    job = await get_job(client, auth, job_id)
    assert job["status"] == "done" and job["progress"] == 1.0, job["last_error"]
    assert job["output"]["filename"] == f"sales.{fmt}"
    content = await output(client, auth, job)
    if fmt == "csv":
        rows: list[Any] = csv_rows(content)
        assert rows[1] == ["1", "2026-01-02", "r1", "1.25", "", "2026-01-01 08:30:01"]
    else:
        rows = xlsx_rows(content)
        from datetime import datetime

        assert rows[1] == (1, datetime(2026, 1, 2), "r1", 1.25, None, datetime(2026, 1, 1, 8, 30, 1))
    assert list(rows[0]) == ["id", "day", "region", "amount", "note", "at"]
    assert len(rows) == DW_ROWS + 1
    async with _session() as session:
        recorded = await session.execute(
            text("SELECT output_rows FROM report_jobs WHERE id = :i"), {"i": job_id}
        )
        assert recorded.scalar_one() == DW_ROWS


def _session() -> Any:
    from app.core.db import session_scope

    return session_scope()


async def test_a_sqlite_source_report_is_done_with_its_rows(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared
) -> None:
    sql = "SELECT region, COUNT(*) AS n FROM sales WHERE id <= :upto GROUP BY region ORDER BY region"
    await declared.use(sql_type("local.regions", sql, source="local", params={"upto": {"type": "integer"}}))
    job_id = await submit_id(client, auth, "local.regions", upto=70)
    await drain()
    job = await get_job(client, auth, job_id)
    assert job["status"] == "done", job
    rows = csv_rows(await output(client, auth, job))
    assert rows == [["region", "n"], *([f"r{i}", "10"] for i in range(7))]


@pytest.mark.parametrize("value", ["r1' OR '1'='1", "r1'; DROP TABLE sales; --", "r1\\' OR 1=1 #"])
async def test_sql_injection_in_a_param_stays_a_bound_value(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared, value: str
) -> None:
    sql = "SELECT id FROM sales WHERE region = :region"
    await declared.use(sql_type("dw.region", sql, params={"region": {"type": "string"}}))
    job_id = await submit_id(client, auth, "dw.region", region=value)
    await drain()
    job = await get_job(client, auth, job_id)
    assert job["status"] == "done", job
    assert csv_rows(await output(client, auth, job)) == [["id"]]  # no region has that name
    assert declared.mariadb.sql("SELECT COUNT(*) FROM dw.sales").split()[-1] == str(DW_ROWS)


async def test_a_sql_report_killed_by_its_query_timeout_is_retried_then_dead_with_the_database_message(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared
) -> None:
    slow = "SELECT COUNT(*) AS n FROM sales a JOIN sales b ON a.amount < b.amount"
    await declared.use(sql_type("dw.slow", slow, query_timeout_s=0.5, max_attempts=2))
    job_id = await submit_id(client, auth, "dw.slow")
    await drain()
    job = await get_job(client, auth, job_id)
    assert (job["status"], job["attempt"]) == ("dead", 2), job
    error = job["last_error"]
    assert error["type"] == "QueryTimedOut" and error["retryable"] is True
    assert "max_statement_time exceeded" in error["message"], error  # MariaDB's own words (1969)
    attempts = await get_attempts(client, auth, job_id)
    assert [a["outcome"] for a in attempts] == ["failed", "failed"]


async def test_a_bad_column_is_dead_after_one_attempt(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared
) -> None:
    declared.mariadb.sql("DROP TABLE IF EXISTS dw.shrinking; CREATE TABLE dw.shrinking (id INT, gone INT)")
    await declared.use(sql_type("dw.shrinking", "SELECT id, gone FROM shrinking"))  # planned fine at load
    declared.mariadb.sql("ALTER TABLE dw.shrinking DROP COLUMN gone")  # ... then the table changed
    job_id = await submit_id(client, auth, "dw.shrinking")
    await drain()
    job = await get_job(client, auth, job_id)
    assert (job["status"], job["attempt"]) == ("dead", 1), job
    assert job["last_error"]["type"] == "SqlError" and job["last_error"]["retryable"] is False
    assert "(1054) Unknown column 'gone'" in job["last_error"]["message"]


async def test_an_unreachable_source_is_retried_until_attempts_run_out(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared
) -> None:
    from devtools.servers.base import free_port

    declared.sources["down"] = f"mysql+asyncmy://ro:pw@127.0.0.1:{free_port()}/dw"
    await declared.use(sql_type("down.sales", "SELECT 1 AS one", source="down", max_attempts=3))
    job_id = await submit_id(client, auth, "down.sales")
    await drain()
    job = await get_job(client, auth, job_id)
    assert (job["status"], job["attempt"]) == ("dead", 3), job
    assert job["last_error"]["type"] == "SourceUnavailable" and job["last_error"]["retryable"] is True


async def test_more_rows_than_the_type_s_limit_fail_permanently(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared
) -> None:
    await declared.use(sql_type("dw.capped", "SELECT id FROM sales", max_rows=1000))
    job_id = await submit_id(client, auth, "dw.capped")
    await drain()
    job = await get_job(client, auth, job_id)
    assert (job["status"], job["attempt"]) == ("dead", 1), job
    assert "more than the limit of 1000 rows" in job["last_error"]["message"]


async def test_the_source_session_is_read_only_whatever_the_user_may_do(declared: Declared) -> None:
    # A source whose user may write (root): the session itself must refuse.
    declared.sources["dw_admin"] = declared.mariadb.url.rsplit("/", 1)[0] + "/dw"
    await declared.use(sql_type("dw.any", "SELECT 1 AS one"))
    for source in ("dw_admin", "local"):
        async with repository.read_only_connection(source, 5.0) as conn:
            with pytest.raises(Exception) as caught:
                await conn.execute(text("DELETE FROM sales"))
        refused = repository.classify(caught.value)
        assert isinstance(refused, repository.SqlError), refused
        assert "READ ONLY transaction" in str(refused) or "readonly database" in str(refused), refused
    assert declared.mariadb.sql("SELECT COUNT(*) FROM dw.sales").split()[-1] == str(DW_ROWS)


async def test_a_cancelled_sql_report_stops_its_query_and_frees_the_worker(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared
) -> None:
    slow = "SELECT COUNT(*) AS n FROM sales a JOIN sales b ON a.amount < b.amount"
    await declared.use(sql_type("dw.slow", slow, query_timeout_s=30))
    job_id = await submit_id(client, auth, "dw.slow")
    draining = asyncio.create_task(drain(timeout_s=20))
    for _ in range(200):
        if (await get_job(client, auth, job_id))["status"] == "running":
            break
        await asyncio.sleep(0.05)
    resp = await client.post(f"/v1/jobs/{job_id}/cancel", headers=auth)
    assert resp.status_code == 202, resp.text
    await draining
    assert (await get_job(client, auth, job_id))["status"] == "cancelled"
    still = declared.mariadb.sql(
        "SELECT COUNT(*) FROM information_schema.processlist"
        " WHERE info LIKE '%a.amount < b.amount%' AND id <> CONNECTION_ID()"
    )
    assert still.strip() == "0", "the cancelled report's query still runs in MariaDB"


async def test_the_shipped_examples_run_against_the_service_s_own_database(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared, base_env: dict[str, str]
) -> None:
    """examples/report-types.toml (what `make run` loads) over MariaDB's `reports` database: both types run,
    and each tenant sees only its own jobs."""
    declared.sources = {"dev": base_env["DATABASE_URL"]}
    await declared.use((ROOT / "examples" / "report-types.toml").read_text(encoding="utf-8"))
    other = await make_key("globex")
    await submit_id(client, other, "demo.csv", rows=1)
    for _ in range(2):
        await submit_id(client, auth, "demo.csv", rows=1)
    per_day = await submit_id(client, auth, "sql.jobs_per_day", since="2026-01-01")
    recent = await submit_id(client, auth, "sql.recent_jobs", limit=10)
    await drain()
    job = await get_job(client, auth, per_day)
    assert job["status"] == "done", job["last_error"]
    rows = csv_rows(await output(client, auth, job))
    assert rows[0] == ["day", "report_type", "jobs", "done", "dead"]
    demo = [r for r in rows[1:] if r[1] == "demo.csv"]
    assert [r[2] for r in demo] == ["2"]  # acme's two, not globex's
    job = await get_job(client, auth, recent)
    assert job["status"] == "done" and job["output"]["filename"] == "recent-jobs.xlsx", job
    book = xlsx_rows(await output(client, auth, job))
    assert book[0] == ("id", "report_type", "status", "attempts", "created_at", "finished_at")
    assert {row[1] for row in book[1:]} == {"demo.csv", "sql.jobs_per_day", "sql.recent_jobs"}
