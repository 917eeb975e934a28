"""Finished jobs by the hundred thousand for retention: rows written server-side by one INSERT … SELECT from
MariaDB's sequence engine (`seq_1_to_N`), with their attempt rows, dead letters and output files if asked.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, Insert, Table, column, func, insert, literal, literal_column, select
from sqlalchemy import text as sql_text

from app.core.db import session_scope
from app.core.ids import new_id
from app.core.repository import insert_values, table_of
from app.core.states import AlertStatus, AttemptOutcome, JobStatus
from app.core.times import utcnow
from app.models import DeadLetter, JobAttempt, ReportJob

#: A job's id is its batch's prefix and its number in the batch (26 characters, like a ULID).
PREFIX_CHARS = 16
NUMBER_CHARS = 26 - PREFIX_CHARS
OUTPUT_NAME = "report.csv"
SEQ: ColumnElement[Any] = column("seq")


@dataclass(frozen=True)
class FinishedBatch:
    """Jobs one `insert_finished_jobs` call wrote: `{prefix}{n:010d}` for n in 1..count."""

    prefix: str
    count: int

    def ids(self) -> list[str]:
        return [f"{self.prefix}{n:0{NUMBER_CHARS}d}" for n in range(1, self.count + 1)]


def numbered(prefix: str) -> ColumnElement[Any]:
    """`{prefix}{seq:010d}`: the batch's id of the sequence's row."""
    return func.concat(prefix, func.lpad(SEQ, NUMBER_CHARS, "0"))


def _from_sequence(table: Table, model: Any, count: int, per_row: Mapping[str, ColumnElement[Any]]) -> Insert:
    """INSERT INTO `table` … SELECT FROM seq_1_to_{count}: the columns in `per_row` computed from `seq`, every
    other one the model's value (bound with its column's type: JSON, enums, UTC datetimes as the app writes
    them)."""
    values = {name: value for name, value in insert_values(table, model).items() if name not in per_row}
    columns = [literal(value, type_=table.c[name].type) for name, value in values.items()]
    rows = select(*per_row.values(), *columns).select_from(sql_text(f"seq_1_to_{int(count)}"))
    return insert(table).from_select([*per_row, *values], rows)


async def insert_finished_jobs(
    count: int,
    finished_at: datetime,
    status: JobStatus = JobStatus.DONE,
    spacing_us: int = 1,
    attempts: bool = True,
    keyed: bool = False,
    output_dir: Path | None = None,
    **columns: Any,
) -> FinishedBatch:
    """`count` jobs in `status` finished from `finished_at` on, `spacing_us` apart, in one statement; each
    with one attempt row when `attempts`, an Idempotency-Key of its own when `keyed`, and a file in
    `output_dir/{id}/r0-a1/` when given (the local store's layout)."""
    batch = FinishedBatch(new_id()[:PREFIX_CHARS], count)
    job = ReportJob(
        id="-",
        tenant="acme",
        report_type="demo.csv",
        params={"rows": 1},
        status=status,
        attempt=1,
        attempts_total=1,
        max_attempts=4,
        timeout_s=5.0,
        created_at=finished_at,
        started_at=finished_at,
        finished_at=finished_at,
        updated_at=finished_at,
        **columns,
    )
    jobs = table_of(ReportJob)
    per_row: dict[str, ColumnElement[Any]] = {"id": numbered(batch.prefix)}
    if spacing_us:
        step: ColumnElement[Any] = literal_column(f"INTERVAL seq * {int(spacing_us)} MICROSECOND")
        per_row["finished_at"] = func.date_add(literal(finished_at, type_=jobs.c.finished_at.type), step)
    if keyed:
        per_row["idempotency_key"] = numbered(f"key-{batch.prefix}")
    statements = [_from_sequence(jobs, job, count, per_row)]
    if attempts:
        attempt = JobAttempt(
            job_id="-",
            attempt=1,
            started_at=finished_at,
            finished_at=finished_at,
            outcome=AttemptOutcome.SUCCEEDED,
        )
        statements.append(_from_sequence(table_of(JobAttempt), attempt, count, {"job_id": per_row["id"]}))
    async with session_scope() as session:
        for statement in statements:
            await session.execute(statement)
    if output_dir is not None:
        await asyncio.to_thread(write_outputs, output_dir, batch.ids())
    return batch


async def insert_attempts(job_ids: Sequence[str]) -> None:
    """An attempt row for each job, by plain INSERT (SQLite too)."""
    now = utcnow()
    table = table_of(JobAttempt)
    rows = [
        insert_values(
            table, JobAttempt(job_id=job_id, attempt=1, started_at=now, outcome=AttemptOutcome.SUCCEEDED)
        )
        for job_id in job_ids
    ]
    async with session_scope() as session:
        await session.execute(insert(table), rows)


async def insert_dead_letters(batch: FinishedBatch) -> None:
    """A dead letter naming each job of `batch` (one statement)."""
    now = utcnow()
    letter = DeadLetter(
        id="-",
        job_id="-",
        tenant="acme",
        report_type="demo.csv",
        params={"rows": 1},
        attempts=1,
        created_at=now,
        expire_at=now + timedelta(days=7),
        alert_status=AlertStatus.SENT,  # nothing for the alert re-publisher
    )
    per_row = {"id": numbered(new_id()[:PREFIX_CHARS]), "job_id": numbered(batch.prefix)}
    async with session_scope() as session:
        await session.execute(_from_sequence(table_of(DeadLetter), letter, batch.count, per_row))


def write_outputs(output_dir: Path, job_ids: Sequence[str]) -> None:
    """A small file per job where the local store keeps an attempt's output."""
    for job_id in job_ids:
        directory = os.path.join(output_dir, job_id, "r0-a1")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, OUTPUT_NAME), "wb") as fh:
            fh.write(b"id,value\n1,2\n")


async def revive(job_id: str) -> None:
    """What a replay does to a cancelled job, as far as retention can tell: waiting again, not finished."""
    async with session_scope() as session:
        stmt = sql_text("UPDATE report_jobs SET status = 'pending', finished_at = NULL WHERE id = :id")
        await session.execute(stmt, {"id": job_id})


async def count_rows(table: str, where: str = "1 = 1", **params: Any) -> int:
    async with session_scope() as session:
        stmt = sql_text(f"SELECT COUNT(*) FROM {table} WHERE {where}")
        return int((await session.execute(stmt, params)).scalar_one())


async def job_ids() -> set[str]:
    async with session_scope() as session:
        return set((await session.execute(sql_text("SELECT id FROM report_jobs"))).scalars())


async def empty_job_tables() -> None:
    """Jobs and what names them, gone at once (a DELETE of a few hundred thousand jobs takes a while)."""
    tables = ("job_attempts", "callback_deliveries", "job_steps", "alert_deliveries", "dead_letters")
    async with session_scope() as session:
        await session.execute(sql_text("SET foreign_key_checks = 0"))
        try:
            for table in (*tables, "report_jobs"):
                await session.execute(sql_text(f"TRUNCATE TABLE {table}"))
        finally:
            await session.execute(sql_text("SET foreign_key_checks = 1"))
