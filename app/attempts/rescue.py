"""The stuck-job scan: running attempts whose worker stopped heartbeating are declared lost (LostWorker) and
retried or dead-lettered as any failure, their slots freed and each retrying job given one new message.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from app.attempts.repository import AttemptRepository
from app.attempts.service import complete_attempt, error_dict, fail_attempt, finish_cancelled
from app.core import metrics
from app.core.db import session_scope
from app.core.states import AttemptKey, AttemptOutcome, JobStatus
from app.core.times import utcnow
from app.dispatch import queue
from app.dispatch.lanes import attempt_code
from app.fairshare.service import release_slots, slots_held
from app.reports import remote

log = logging.getLogger(__name__)


async def declare_lost(stuck_after_s: float, limit: int = 500) -> int:
    """Running attempts silent for `stuck_after_s` → outcome lost (LostWorker) → retry or dead as usual.

    Their slots go first, and with each the message of the lost holder; only then does a job that retries
    get its one new message (an arq id of its own, so the old holder's worker, should it still be alive,
    cannot finish the new message away)."""
    now = utcnow()
    async with session_scope() as session:
        stuck = await AttemptRepository(session).stuck_jobs(now - timedelta(seconds=stuck_after_s), limit)
    if not stuck:
        return 0
    try:  # the slots as they are before the attempts end: one a claim takes over after this stays its own
        seen = await slots_held()
    except Exception as exc:  # Redis away: the sweep frees them at a later tick
        log.warning("slots of stuck jobs not read", extra={"error": repr(exc)})
        seen = {}
    declared = 0
    over: list[str] = []
    fences: dict[str, int] = {}  # their attempts, fenced off from a late start of their stalled workers
    rescues: list[queue.RunMessage] = []
    for job in stuck:
        key = AttemptKey(
            job.id,
            job.attempt,
            job.replay_count,
            report_type=job.report_type,
            tenant=job.tenant,
            created_at=job.created_at,
            started_at=job.started_at,
        )
        if job.cancel_requested:
            if await finish_cancelled(key):
                declared += 1
                over.append(job.id)
                fences[job.id] = attempt_code(key.replay, key.attempt)
            continue
        reported = await remote.reported_outcome(job.id, job.replay_count, job.attempt)
        if reported is not None and reported.outcome == "succeeded":
            # An outside service reported the file (answered 202) and the worker waiting for it died: the
            # attempt succeeded, it is not lost.
            if await complete_attempt(key, remote.output_of(reported)):
                declared += 1
                over.append(job.id)
                fences[job.id] = attempt_code(key.replay, key.attempt)
            continue
        message = f"no heartbeat for {stuck_after_s:g} s from worker {job.worker or '?'}"
        outcome, error = AttemptOutcome.LOST, error_dict("LostWorker", message, True)
        if reported is not None:  # the service reported a failure: that is the attempt's outcome
            outcome, error = AttemptOutcome.FAILED, remote.error_of(reported)
        result = await fail_attempt(key, outcome, error)
        if not result.applied:
            continue
        declared += 1
        over.append(job.id)
        fences[job.id] = attempt_code(key.replay, key.attempt)
        metrics.count_rescued(job)
        if result.status == JobStatus.RETRYING:
            rescues.append(
                queue.RunMessage(
                    job.id,
                    job.replay_count,
                    defer_until=now + timedelta(seconds=result.delay_s),
                    traceparent=job.traceparent,
                    lane=queue.lane_of(job),
                    suffix=f"lost{key.attempt}",
                )
            )
    if over:
        # Their slots (caps, fair share) are free again now, not when the dead worker's lease runs out.
        try:
            await release_slots(over, seen, fences)
        except Exception as exc:  # the sweep frees them at a later tick (and reconciliation enqueues)
            log.warning("slots of lost jobs not freed yet", extra={"error": repr(exc)})
    await queue.enqueue_runs_explained(rescues)
    return declared
