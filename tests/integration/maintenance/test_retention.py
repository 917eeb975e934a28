"""Retention: finished jobs and their files go after JOB_RETENTION_S, batch after batch within a tick's
budget; what must stay (a dead letter's job, an Idempotency-Key's, a job revived meanwhile), stays."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from app.core.config import get_settings
from app.core.db import session_scope
from app.core.states import JobStatus
from app.core.times import utcnow
from app.maintenance import service as maintenance
from app.maintenance.repository import Expiry, MaintenanceRepository
from tests.utils.bulk_jobs import insert_jobs
from tests.utils.database import alembic
from tests.utils.jobs import submit_id
from tests.utils.retention import (
    FinishedBatch,
    count_rows,
    insert_attempts,
    insert_dead_letters,
    insert_finished_jobs,
    revive,
)
from tests.utils.workers import drain


async def test_expired_jobs_and_their_files_are_purged_but_dead_letters_and_idempotency_keep_theirs(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(JOB_RETENTION_S="0.3", IDEMPOTENCY_TTL_S="3600")
    done = await submit_id(client, auth, "demo.csv", rows=5)
    cancelled = await submit_id(client, auth, "demo.csv", rows=5)
    await client.post(f"/v1/jobs/{cancelled}/cancel", headers=auth)
    dead = await submit_id(client, auth, "demo.flaky", fail_times=1, permanent=True)
    keyed = await submit_id(client, {**auth, "Idempotency-Key": "order-7"}, "demo.csv", rows=1)
    await drain()
    output_dir = Path(get_settings().output_dir) / done
    assert output_dir.is_dir()

    await asyncio.sleep(0.4)
    report = await maintenance.run_tick(use_lease=False)
    assert report["jobs_purged"] == 2
    for job_id in (done, cancelled):
        assert (await client.get(f"/v1/jobs/{job_id}", headers=auth)).status_code == 404
    assert not output_dir.exists()
    # A dead job stays while its dead letter does; a job holding an Idempotency-Key stays for the key's TTL.
    assert (await client.get(f"/v1/jobs/{dead}", headers=auth)).json()["status"] == "dead"
    again = await client.post(
        "/v1/jobs",
        json={"report_type": "demo.csv", "params": {"rows": 1}},
        headers={**auth, "Idempotency-Key": "order-7"},
    )
    assert again.status_code == 200 and again.json()["id"] == keyed


async def test_one_tick_purges_batch_after_batch_until_nothing_expired_is_left(env: Any) -> None:
    await env.set(JOB_RETENTION_S="60", SCAN_INTERVAL_S="60")  # a tick's budget: 42 s
    old = utcnow() - timedelta(minutes=10)
    done = await insert_finished_jobs(2 * maintenance.PURGE_BATCH + 500, old)
    cancelled = await insert_finished_jobs(300, old, status=JobStatus.CANCELLED)
    recent = await insert_finished_jobs(400, utcnow())

    report = await maintenance.run_tick(use_lease=False)

    assert report["jobs_purged"] == done.count + cancelled.count
    assert await count_rows("report_jobs") == recent.count
    assert await count_rows("job_attempts") == recent.count  # each job's attempts went with it


async def test_a_tick_past_its_budget_ends_after_its_first_batch_and_the_next_goes_on(env: Any) -> None:
    await env.set(JOB_RETENTION_S="60")
    expired = await insert_finished_jobs(maintenance.PURGE_BATCH + 700, utcnow() - timedelta(minutes=10))

    assert await maintenance.purge_expired_jobs(budget_s=0) == maintenance.PURGE_BATCH
    assert await count_rows("report_jobs") == expired.count - maintenance.PURGE_BATCH
    assert await maintenance.purge_expired_jobs(budget_s=0) == 700
    assert await count_rows("report_jobs") == 0


async def test_jobs_that_must_stay_are_passed_over_and_the_walk_purges_what_lies_beyond(env: Any) -> None:
    """A whole first page of jobs holding their Idempotency-Key, then dead-lettered jobs, then plain ones:
    the walk goes past the first two (kept with their attempts) and purges the last."""
    await env.set(JOB_RETENTION_S="60", IDEMPOTENCY_TTL_S="3600", SCAN_INTERVAL_S="60")
    old = utcnow() - timedelta(minutes=10)
    keyed = await insert_finished_jobs(maintenance.PURGE_BATCH, old, keyed=True)
    lettered = await insert_finished_jobs(50, old + timedelta(seconds=1), status=JobStatus.DEAD)
    await insert_dead_letters(lettered)
    plain = await insert_finished_jobs(maintenance.PURGE_BATCH + 10, old + timedelta(seconds=2))

    assert await maintenance.purge_expired_jobs() == plain.count

    assert await count_rows("report_jobs") == keyed.count + lettered.count
    assert await count_rows("job_attempts") == keyed.count + lettered.count
    assert await count_rows("dead_letters") == lettered.count


async def test_the_delete_keeps_a_job_revived_or_dead_lettered_after_it_was_read(env: Any) -> None:
    """Between the page's read and the DELETE a replay brought one job back to life and another got a dead
    letter: the guarded DELETE repeats the conditions, so both stay, with their attempts and the letter
    (whose foreign key would have cascaded)."""
    now = utcnow()
    expiry = Expiry(finished_before=now, idempotent_before=now)
    batch = await insert_finished_jobs(20, now - timedelta(minutes=1), status=JobStatus.CANCELLED)
    lettered, revived = batch.ids()[:2]
    async with session_scope() as session:
        page = await MaintenanceRepository(session).retention_page(JobStatus.CANCELLED, expiry, None, 100)
    assert [entry.id for entry in page if entry.expired] == batch.ids()
    await revive(revived)
    await insert_dead_letters(FinishedBatch(batch.prefix, 1))  # the first job's

    async with session_scope() as session:
        assert await MaintenanceRepository(session).delete_expired(batch.ids(), expiry) == batch.count - 2

    assert await count_rows("report_jobs") == 2
    assert await count_rows("job_attempts") == 2
    assert await count_rows("dead_letters", "job_id = :id", id=lettered) == 1


async def test_on_sqlite_retention_purges_batch_after_batch_and_the_attempts_go_with_their_jobs(
    env: Any, tmp_path: Path
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'reports.db'}"
    assert alembic(url, "upgrade", "head").returncode == 0
    await env.set(DATABASE_URL=url, JOB_RETENTION_S="60", SCAN_INTERVAL_S="60")
    expired = await insert_jobs(
        maintenance.PURGE_BATCH + 10, status=JobStatus.DONE, finished_at=utcnow() - timedelta(minutes=10)
    )
    recent = await insert_jobs(5, status=JobStatus.DONE, finished_at=utcnow())
    await insert_attempts(expired + recent)

    assert await maintenance.purge_expired_jobs() == len(expired)

    assert await count_rows("report_jobs") == len(recent)
    assert await count_rows("job_attempts") == len(recent)


async def global_rows_read() -> int:
    """Index entries and rows the suite's MariaDB has read so far (every connection: a tick uses several)."""
    async with session_scope() as session:
        status = await session.execute(text("SHOW GLOBAL STATUS LIKE 'Handler_read%'"))
        reads = {row[0]: int(row[1]) for row in status}
    return reads["Handler_read_key"] + reads["Handler_read_next"]


async def test_jobs_that_must_stay_are_read_once_a_revisit_not_once_a_tick(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three pages of jobs holding their Idempotency-Key gather at the head of the walk: a tick after the
    one that passed over them reads what finished since, not them again; once REVISIT_S passed the walk
    starts from the head and purges those the key no longer keeps."""
    await env.set(JOB_RETENTION_S="60", IDEMPOTENCY_TTL_S="3600", SCAN_INTERVAL_S="60")
    old = utcnow() - timedelta(minutes=10)
    keyed = await insert_finished_jobs(3 * maintenance.PURGE_BATCH, old, keyed=True)
    first = await insert_finished_jobs(100, old + timedelta(seconds=1))
    assert await maintenance.purge_expired_jobs() == first.count
    later = await insert_finished_jobs(50, utcnow() - timedelta(minutes=5))

    before = await global_rows_read()
    assert await maintenance.purge_expired_jobs() == later.count
    assert await global_rows_read() - before < maintenance.PURGE_BATCH  # not the 6,000 kept jobs again

    monkeypatch.setattr(get_settings(), "idempotency_ttl_s", 60.0)  # the keys no longer keep them ...
    assert await maintenance.purge_expired_jobs() == 0  # ... but the walk goes on past them: not seen yet
    monkeypatch.setattr(maintenance, "REVISIT_S", 0.0)
    assert await maintenance.purge_expired_jobs() == keyed.count
    assert await count_rows("report_jobs") == 0
