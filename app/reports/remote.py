"""Attempts run by an outside service (asynchronous HTTP reports): the worker hands an attempt over and
polls for its outcome; the service reports through its attempt token (heartbeat, progress, the file, a
failure), each a compare-and-set against that attempt still running and not yet reported.

The worker holding the attempt stays the only writer of the job: the API records what the service said
(and stores an uploaded file under the attempt's key), the worker acts on it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from app.core.attempt_tokens import AttemptClaim, TokenRefused, verify
from app.core.config import get_settings
from app.core.db import session_scope
from app.core.ids import new_id
from app.core.times import utcnow
from app.models import RemoteAttempt
from app.outputs import get_output_store
from app.outputs.base import attempt_key, safe_filename
from app.outputs.local import AtomicFile
from app.reports.base import OutputInfo
from app.reports.remote_repository import AttemptState, RemoteAttemptRepository


class AttemptCallbackRefused(Exception):
    """A call on an attempt token that changes nothing; `status` is the HTTP answer. `cancel` tells the
    service to stop working on the attempt (it ended, or it is being cancelled)."""

    def __init__(self, status: int, detail: str, cancel: bool = False) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.cancel = cancel


@dataclass(frozen=True)
class Upload:
    filename: str
    content_type: str
    rows: int | None


# ---- the worker's side ----------------------------------------------------------------------------------


async def hand_over(job_id: str, replay: int, attempt: int, tenant: str) -> tuple[str, RemoteAttempt | None]:
    """Open the attempt's row before the service is called; returns the run's nonce (its token carries it),
    or the outcome an earlier run of this attempt number reported before it was handed back (the service
    was answered 202: its result is taken, the service is not called again)."""
    nonce = new_id()
    async with session_scope() as session:
        repo = RemoteAttemptRepository(session)
        reported = await repo.open((job_id, replay, attempt), tenant, nonce, utcnow())
    return nonce, reported


async def reported_outcome(job_id: str, replay: int, attempt: int) -> RemoteAttempt | None:
    """The outcome the service reported for this attempt, if any (the stuck scan applies it rather than
    declaring the attempt lost: the service was answered 202)."""
    async with session_scope() as session:
        row = await RemoteAttemptRepository(session).reported((job_id, replay, attempt))
    return row if row is not None and row.outcome is not None else None


async def poll(job_id: str, replay: int, attempt: int) -> RemoteAttempt | None:
    """What the service reported so far (one primary-key read)."""
    async with session_scope() as session:
        return await RemoteAttemptRepository(session).get((job_id, replay, attempt))


def output_of(row: RemoteAttempt) -> OutputInfo:
    """The file a reported success names, as the attempt's output."""
    return OutputInfo(
        path=row.output_path or "",
        filename=row.output_filename or "",
        content_type=row.output_content_type or "application/octet-stream",
        size=row.output_size or 0,
        rows=row.output_rows,
    )


def error_of(row: RemoteAttempt) -> dict[str, Any]:
    """A reported failure as the attempt's error (retryable as the service said)."""
    error = row.error or {}
    message = str(error.get("message", ""))
    return {
        "type": "RemoteReportFailed",
        "message": f"the service reported a failure: {message}"[:2000],
        "retryable": bool(error.get("retryable")),
    }


# ---- the service's side (the attempt-callback routes) ------------------------------------------------


def _claim(token: str) -> AttemptClaim:
    try:
        return verify(token, get_settings())
    except TokenRefused as exc:
        raise AttemptCallbackRefused(exc.status, str(exc), cancel=exc.status == 410) from None


def _beat_after() -> datetime:
    """A report is taken only while the attempt's worker beats: one silent for half of STUCK_AFTER_S may be
    being declared lost (its worker died), so a report then is refused (410), never accepted and dropped;
    one taken before is applied by the stuck scan if no worker does (`reported_outcome`)."""
    return utcnow() - timedelta(seconds=get_settings().stuck_after_s / 2)


def _refuse_ended(claim: AttemptClaim, state: AttemptState) -> None:
    if not state.found:
        raise AttemptCallbackRefused(404, f"No job {claim.job_id!r}.", cancel=True)
    if not state.running:
        how = f" ({state.outcome})" if state.outcome else ""
        detail = (
            f"Attempt {claim.attempt} of job {claim.job_id} is no longer running{how}; stop working on it."
        )
        raise AttemptCallbackRefused(410, detail, cancel=True)


async def _record(claim: AttemptClaim, values: dict[str, Any]) -> AttemptState:
    """Check the attempt still runs, then record `values` on this run's row while no outcome was reported."""
    async with session_scope() as session:
        repo = RemoteAttemptRepository(session)
        state = await repo.state(claim, _beat_after())
        _refuse_ended(claim, state)
        if await repo.touch(claim, values) == 1:
            return state
        row = await repo.get((claim.job_id, claim.replay, claim.attempt))
    if row is None or row.nonce != claim.nonce:
        detail = f"This token is of an earlier run of attempt {claim.attempt}; stop working on it."
        raise AttemptCallbackRefused(410, detail, cancel=True)
    raise AttemptCallbackRefused(409, f"The outcome of this attempt was already reported ({row.outcome}).")


async def heartbeat(token: str, progress: float | None) -> bool:
    """The service is alive (and how far it got); returns whether a cancel of the job was asked."""
    claim = _claim(token)
    values: dict[str, Any] = {"seen_at": utcnow()}
    if progress is not None:
        values["progress"] = progress
    state = await _record(claim, values)
    return state.cancel_requested


async def fail(token: str, message: str, retryable: bool) -> None:
    claim = _claim(token)
    error = {"type": "RemoteReportFailed", "message": message[:2000], "retryable": retryable}
    now = utcnow()
    await _record(claim, {"seen_at": now, "outcome": "failed", "error": error, "finished_at": now})


async def complete(token: str, chunks: AsyncIterator[bytes], upload: Upload) -> None:
    """Store the uploaded file under the attempt's key, then record it as the attempt's outcome; a refused
    call stores nothing (the file is removed again)."""
    claim = _claim(token)
    async with session_scope() as session:
        _refuse_ended(claim, await RemoteAttemptRepository(session).state(claim, _beat_after()))
    name = safe_filename(upload.filename)
    key = attempt_key(claim.job_id, claim.replay, claim.attempt, f"{new_id().lower()}-{name}")
    size = await _store(key, chunks, upload.content_type, name)
    now = utcnow()
    values = {
        "seen_at": now,
        "outcome": "succeeded",
        "finished_at": now,
        "output_path": key,
        "output_filename": name,
        "output_content_type": upload.content_type[:100],
        "output_size": size,
        "output_rows": upload.rows,
    }
    try:
        await _record(claim, values)
    except BaseException:
        with contextlib.suppress(OSError):
            _forget(key)
        raise


class UploadTooLarge(AttemptCallbackRefused):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The uploaded file exceeds {limit} bytes (ATTEMPT_UPLOAD_MAX_BYTES).")


async def _store(key: str, chunks: AsyncIterator[bytes], content_type: str, name: str) -> int:
    """Spool the body to local disk (at most ATTEMPT_UPLOAD_MAX_BYTES), then publish it under `key`."""
    store = get_output_store()
    limit = get_settings().attempt_upload_max_bytes
    atomic = AtomicFile(store.spool_dir / key, binary=True)
    fh = atomic.open()
    written = 0
    try:
        async for chunk in chunks:
            written += len(chunk)
            if written > limit:
                raise UploadTooLarge(limit)
            fh.write(chunk)
        size = await asyncio.to_thread(atomic.commit)
    except BaseException:
        atomic.abort()
        raise
    if not store.keeps_spool:
        try:
            await store.save(key, atomic.final_path, content_type, name)
        finally:
            atomic.final_path.unlink(missing_ok=True)
    return size


def _forget(key: str) -> None:
    """Remove a stored upload the attempt did not take (local store; an object store's is left to
    retention, which deletes the job's files with it)."""
    path = Path(get_output_store().spool_dir) / key
    path.unlink(missing_ok=True)
