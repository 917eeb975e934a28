"""Group commit of single submits: the new jobs of concurrent `POST /v1/jobs` requests in one API process
share one transaction (one multi-row INSERT, one commit) and one enqueue script, each answered on its own.

A lone request is written at once (no waiting for company). A batch whose INSERT fails (another request took
an Idempotency-Key first) is inserted again job by job, so the failure is only that job's. A row is always
enqueued by the flush that committed it, so a request cancelled mid-way leaves no committed job unqueued.
"""

from __future__ import annotations

from functools import cache

from app.core import failpoints
from app.core.config import get_settings
from app.core.db import is_db_outage, is_lock_conflict
from app.core.grouping import GroupCommit
from app.dispatch import queue
from app.dispatch.lanes import Wait
from app.jobs.repository import insert_jobs
from app.models import ReportJob

NewJob = tuple[ReportJob, queue.RunMessage]


async def insert_and_enqueue(row: ReportJob, message: queue.RunMessage) -> Wait | None:
    """Commit `row` (raising `IntegrityError` when its Idempotency-Key was taken), then enqueue `message`;
    what would keep the job waiting (None: nothing, or Redis refused and reconciliation will enqueue it)."""
    return await _submits().submit((row, message))


@cache
def _submits() -> GroupCommit[NewJob, Wait | None]:
    return GroupCommit(_flush, get_settings().api_group_commit_max_jobs)


def group_stats() -> dict[str, int]:
    """Batches and jobs flushed so far in this process (the tests read them)."""
    return {"flushes": _submits().flushes, "jobs": _submits().items}


def reset() -> None:
    """Forget the group committer (tests change the settings between cases)."""
    _submits.cache_clear()


async def _flush(jobs: list[NewJob]) -> list[Wait | BaseException | None]:
    results: list[Wait | BaseException | None] = [None] * len(jobs)
    try:
        await _insert([row for row, _ in jobs])
        inserted = list(range(len(jobs)))
    except Exception as exc:
        if len(jobs) == 1 or (is_db_outage(exc) and not is_lock_conflict(exc)):
            raise  # the database is gone (or the only job failed): every job of the batch gets the error
        inserted = []
        for index, (row, _) in enumerate(jobs):
            try:
                await _insert([row])
                inserted.append(index)
            except Exception as own:  # this job's error (its key was taken), handed to its own request
                results[index] = own
    await failpoints.hit("submit.after_commit")
    waits = await queue.enqueue_runs_explained([jobs[index][1] for index in inserted])
    for index, wait in zip(inserted, waits, strict=True):
        results[index] = wait
    return results


async def _insert(rows: list[ReportJob]) -> None:
    # Rows in Idempotency-Key order: two API processes' batches lock shared keys in the same order.
    ordered = sorted(rows, key=lambda row: (row.idempotency_key is not None, row.idempotency_key or ""))
    await insert_jobs(ordered)
