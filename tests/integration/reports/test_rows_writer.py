"""A Python report type writing rows with `ctx.rows_writer`: the job's `format` param picks CSV or XLSX, the
rows are counted into the job (so delivery's skip-when-empty works) and progress follows them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx
import pytest

from app.reports.registry import registry
from tests.utils.declared import csv_rows, xlsx_rows
from tests.utils.jobs import get_job, submit_id
from tests.utils.workers import drain


@pytest.fixture(autouse=True)
def rows_type() -> None:
    registry.load(False, ["tests.utils.rows_report"])


async def output(client: httpx.AsyncClient, auth: dict[str, str], job: dict[str, Any]) -> bytes:
    resp = await client.get(job["output"]["url"], headers=auth)
    assert resp.status_code == 200, resp.text
    return resp.content


async def test_the_job_s_format_param_picks_xlsx_and_the_rows_are_counted(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_id = await submit_id(client, auth, "test.rows", rows=3000, format="xlsx")
    await drain()
    job = await get_job(client, auth, job_id)
    assert job["status"] == "done" and job["progress"] == 1.0, job["last_error"]
    assert job["output"]["filename"] == "rows.xlsx"
    book = xlsx_rows(await output(client, auth, job))
    assert book[0] == ("n", "day", "amount", "label") and len(book) == 3001
    assert book[2] == (1, datetime(2026, 1, 2), 0.25, "label 1")
    from sqlalchemy import text

    from app.core.db import session_scope

    async with session_scope() as session:
        rows = await session.execute(text("SELECT output_rows FROM report_jobs WHERE id = :i"), {"i": job_id})
        assert rows.scalar_one() == 3000


async def test_without_a_format_the_rows_are_csv_and_zero_rows_is_an_empty_report(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_id = await submit_id(client, auth, "test.rows", rows=0)
    await drain()
    job = await get_job(client, auth, job_id)
    assert job["status"] == "done" and job["output"]["filename"] == "rows.csv"
    assert csv_rows(await output(client, auth, job)) == [["n", "day", "amount", "label"]]
