"""Bulk submit: many job requests in one call, each answered on its own (created, existing, or refused),
with one transaction for every new row and one Redis round trip to enqueue them after the commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import IntegrityError

from app.core import metrics, redis_pool, tracing
from app.core.config import get_settings
from app.core.errors import IdempotencyConflict, OrchestratorError, ValidationFailed
from app.core.ids import new_id
from app.core.times import utcnow
from app.dispatch import queue
from app.fairshare.service import waiting_document
from app.jobs.repository import insert_jobs
from app.jobs.service import (
    Checked,
    SubmitRequest,
    SubmitResult,
    by_idempotency_keys,
    check_submit,
    existing_answer,
    new_job_row,
    rate_limited,
    run_message,
)
from app.models import ReportJob

#: What each item of a batch ends as: its job (new or an idempotent repeat) or why it was refused.
BatchOutcome = SubmitResult | OrchestratorError


@dataclass(frozen=True)
class BatchEntry:
    """One item of a batch: the single-submit request and its optional Idempotency-Key."""

    request: SubmitRequest
    idempotency_key: str | None = None


@dataclass
class _Item:
    index: int
    entry: BatchEntry
    checked: Checked
    fingerprint: str | None

    @property
    def key(self) -> str | None:
        return self.entry.idempotency_key


async def submit_batch(tenant: str, entries: Sequence[BatchEntry | OrchestratorError]) -> list[BatchOutcome]:
    """Each entry gets what a single submit would answer, in order. An entry that is already an error (the
    caller could not even read it) stays that error. A database outage raises: nothing is created."""
    with tracing.span("submit_batch", attributes={"job.tenant": tenant, "batch.items": len(entries)}) as span:
        outcomes = await _submit_batch(tenant, entries)
        created = sum(isinstance(o, SubmitResult) and o.created for o in outcomes)
        tracing.annotate(span, {"batch.created": created})
        return outcomes


async def _submit_batch(tenant: str, entries: Sequence[BatchEntry | OrchestratorError]) -> list[BatchOutcome]:
    now = utcnow()
    outcomes: list[BatchOutcome | None] = [e if isinstance(e, OrchestratorError) else None for e in entries]
    callback_problems: dict[str, str | None] = {}
    owners: dict[str, _Item] = {}  # the first valid item of each key decides what the key means
    fresh: list[_Item] = []  # items that need a new job, in request order
    repeats: list[_Item] = []  # later items repeating a key within this batch
    for index, entry in enumerate(entries):
        if isinstance(entry, OrchestratorError):
            continue
        try:
            checked = await check_submit(tenant, entry.request, now, callback_problems)
        except ValidationFailed as exc:
            outcomes[index] = exc
            continue
        key = entry.idempotency_key
        item = _Item(index, entry, checked, entry.request.fingerprint() if key else None)
        if key is None:
            fresh.append(item)
        elif key in owners:
            repeats.append(item)
        else:
            owners[key] = item
            fresh.append(item)
    if owners:
        fresh = _answer_existing(fresh, await by_idempotency_keys(tenant, owners.keys()), outcomes)
    fresh = await _within_rate_limit(tenant, fresh, outcomes)
    rows = await _insert(tenant, fresh, now, outcomes)
    waits = await queue.enqueue_runs_explained([run_message(row) for _, row in rows])
    for (item, row), wait in zip(rows, waits, strict=True):
        metrics.count_submitted(row)
        outcomes[item.index] = SubmitResult(row, created=True, waiting_for=waiting_document(wait))
    for item in repeats:
        outcomes[item.index] = _repeat_outcome(item, owners[item.key or ""], outcomes)
    assert all(o is not None for o in outcomes)
    return [o for o in outcomes if o is not None]


def _answer_existing(
    items: list[_Item], existing: dict[str, ReportJob], outcomes: list[BatchOutcome | None]
) -> list[_Item]:
    """Answer the items whose key already holds a job (200, or 409 for another body); returns the rest."""
    rest = []
    for item in items:
        row = existing.get(item.key) if item.key else None
        if row is None:
            rest.append(item)
            continue
        assert item.fingerprint is not None
        try:
            outcomes[item.index] = existing_answer(row, item.fingerprint)
        except IdempotencyConflict as exc:
            outcomes[item.index] = exc
    return rest


async def _within_rate_limit(
    tenant: str, items: list[_Item], outcomes: list[BatchOutcome | None]
) -> list[_Item]:
    """Each new item counts as one submit; the first ones that fit the tenant's budget go on, the rest are
    429 (idempotent repeats were answered before and spend nothing, as in single submit)."""
    per_minute = get_settings().submit_rate_limit_per_minute
    if not per_minute or not items:
        return items
    allowed, retry_after_s = await redis_pool.take_rate_tokens(tenant, per_minute, len(items))
    for item in items[allowed:]:
        outcomes[item.index] = rate_limited(tenant, per_minute, retry_after_s)
    return items[:allowed]


async def _insert(
    tenant: str, items: list[_Item], now: datetime, outcomes: list[BatchOutcome | None]
) -> list[tuple[_Item, ReportJob]]:
    """Insert every new row in one transaction. A concurrent request that took one of our keys first makes
    the INSERT fail on the (tenant, key) unique index, as in single submit: those items answer its job and
    the rest are inserted again. Rows go in key order, so two batches lock shared keys in the same order."""
    while items:
        # Ids in request order: jobs of one ordering key in a batch (same created_at) run in that order.
        job_ids = sorted(new_id() for _ in items)
        rows = [
            (item, new_job_row(tenant, item.entry.request, item.checked, item.key, item.fingerprint, now, i))
            for item, i in zip(items, job_ids, strict=True)
        ]
        ordered = sorted(rows, key=lambda pair: (pair[0].key is not None, pair[0].key or ""))
        try:
            await insert_jobs([row for _, row in ordered])
            return rows
        except IntegrityError:
            keys = [item.key for item in items if item.key]
            taken = await by_idempotency_keys(tenant, keys) if keys else {}
            if not taken:
                raise
            items = _answer_existing(items, taken, outcomes)
    return []


def _repeat_outcome(item: _Item, owner: _Item, outcomes: list[BatchOutcome | None]) -> BatchOutcome:
    """A key repeated inside the batch: the same body gets what its first item got (its job, as a 200);
    another body is a 409."""
    if item.fingerprint != owner.fingerprint:
        return IdempotencyConflict("This Idempotency-Key was already used with a different request body.")
    first = outcomes[owner.index]
    assert first is not None
    return SubmitResult(first.job, created=False) if isinstance(first, SubmitResult) else first
