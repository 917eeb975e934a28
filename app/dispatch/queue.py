"""Messages onto the queues, always after the commit: report runs (one per job, in its lane), dead letters and
callbacks. Redis only carries work; when an enqueue fails the job stays committed and is enqueued again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from arq.constants import job_key_prefix
from arq.jobs import serialize_job

from app.core.config import get_settings
from app.core.redis_pool import get_pool, serialize
from app.dispatch.lanes import Lane, Wait, registered_scripts
from app.models import ReportJob

log = logging.getLogger(__name__)

RUN_REPORT = "run_report"
# Workers listen here and poll at once: an idle worker picks a new job up in milliseconds, not a poll delay.
WAKE_CHANNEL = "ro:wake"
HANDLE_DEAD_LETTER = "handle_dead_letter"
DELIVER_CALLBACK = "deliver_callback"
DELIVER_REPORT = "deliver_report"
DELIVER_DIGEST = "deliver_digest"


# No expiry (arq's default: a day past the due time): a message waits as long as its job legitimately does (a
# pause, a full cap, a backlog); it leaves when it runs, or when a worker finds its job no longer startable.
NO_EXPIRY = 0


def arq_job_id(job_id: str, replay_count: int, suffix: str | None = None) -> str:
    """One arq job per replay generation; retries reuse it through `Retry`, so Redis dedups re-enqueues."""
    return f"{job_id}:{replay_count}" + (f":{suffix}" if suffix else "")


def lane_of(job: ReportJob) -> Lane:
    """The lane a job's messages wait in: its priority, tenant and report type."""
    return Lane(job.priority, job.tenant, job.report_type)


async def enqueue_run(
    job_id: str,
    replay_count: int,
    defer_until: datetime | None = None,
    suffix: str | None = None,
    traceparent: str | None = None,
    lane: Lane | None = None,
) -> bool:
    """Put a report job on the main queue, in its `lane` (priority, tenant, report type): True if a new
    message was queued (or a queued one nobody held was put back in its lane), False if the job already has
    its message (whatever its arq id: one message per job) or Redis refused (logged). Never raises. A job
    whose message is running gets it once more if that run ends without running the job again.

    `traceparent` (the job's trace context) rides as a keyword argument of the message, so the attempt span
    covers picking the job up; dedup stays on the arq job id, and a message without it still works."""
    message = RunMessage(job_id, replay_count, defer_until, traceparent, lane or Lane(), suffix)
    try:
        queued, _ = await _enqueue([message])
        return queued[0]
    except Exception as exc:
        log.warning(
            "enqueue failed; the scheduler will re-enqueue", extra={"job_id": job_id, "error": repr(exc)}
        )
        return False


DEFAULT_LANE = Lane()


@dataclass(frozen=True)
class RunMessage:
    """One report job to put on the main queue (what `enqueue_run` takes, for a batch)."""

    job_id: str
    replay_count: int
    defer_until: datetime | None = None
    traceparent: str | None = None
    lane: Lane = DEFAULT_LANE
    suffix: str | None = None


async def _enqueue(messages: Sequence[RunMessage]) -> tuple[list[bool], list[Wait | None]]:
    """arq's enqueue_job for every message in one script call (dedup on the job: one message each; the
    message, the queue) plus each message's lane, and one wake-up if anything was queued. Returns, per
    message, whether it was queued and what would keep it waiting now (a pause, a full cap)."""
    scripts = await registered_scripts()
    now_ms = int(time.time() * 1000)
    args: list[str | int | bytes] = [WAKE_CHANNEL]
    for message in messages:
        arq_id = arq_job_id(message.job_id, message.replay_count, message.suffix)
        defer_until = message.defer_until
        score = int(defer_until.timestamp() * 1000) if defer_until is not None else now_ms
        kwargs = {"traceparent": message.traceparent} if message.traceparent else {}
        payload = serialize_job(RUN_REPORT, (message.job_id,), kwargs, None, now_ms, serializer=serialize)
        args += (NO_EXPIRY, payload, score, arq_id, message.lane.encoded())
    queued, waits = await scripts.enqueue(keys=[get_settings().queue_name], args=args)
    return [bool(flag) for flag in queued], [Wait.parse(wait) for wait in waits]


async def enqueue_explained(message: RunMessage) -> tuple[bool, Wait | None]:
    """`enqueue_run` for a new job, also telling what would keep it waiting (for the submit's answer).
    Never raises: (False, None) when Redis refused."""
    try:
        queued, waits = await _enqueue([message])
        return queued[0], waits[0]
    except Exception as exc:
        log.warning(
            "enqueue failed; the scheduler will re-enqueue",
            extra={"job_id": message.job_id, "error": repr(exc)},
        )
        return False, None


async def enqueue_runs_explained(messages: Sequence[RunMessage]) -> list[Wait | None]:
    """`enqueue_run` for many jobs in one round trip (one script call, at most one wake-up), telling what
    would keep each new job waiting (for a batch's answers). Never raises: all None when Redis refused (the
    scheduler's reconciliation enqueues the jobs)."""
    if not messages:
        return []
    try:
        return (await _enqueue(messages))[1]
    except Exception as exc:
        log.warning(
            "batch enqueue failed; the scheduler will re-enqueue",
            extra={"jobs": len(messages), "error": repr(exc)},
        )
        return [None] * len(messages)


async def enqueue_messages(messages: Sequence[RunMessage]) -> tuple[list[bool], list[Wait | None]]:
    """`enqueue_runs_explained` telling, per message, whether it was queued and what would keep it waiting;
    raises when Redis refuses (for the scheduler, which reports it)."""
    if not messages:
        return [], []
    return await _enqueue(messages)


async def enqueue_dead_letter(letter_id: str) -> bool:
    try:
        pool = await get_pool()
        await pool.enqueue_job(
            HANDLE_DEAD_LETTER,
            letter_id,
            _job_id=f"dl:{letter_id}",
            _queue_name=get_settings().dead_letter_queue_name,
        )
        return True
    except Exception as exc:
        log.warning(
            "dead-letter publish failed; the scheduler will re-publish",
            extra={"dead_letter_id": letter_id, "error": repr(exc)},
        )
        return False


async def enqueue_callback(delivery_id: str, defer_until: datetime | None = None) -> bool:
    """Completion callbacks ride the failed channel's consumer (the notifications process)."""
    return await _notify(DELIVER_CALLBACK, f"cb:{delivery_id}", delivery_id, defer_until)


async def enqueue_delivery(delivery_id: str, round_: int) -> bool:
    """A finished report's delivery (or a notice) to a destination: the notifications process sends it.
    One message a round: a resend's is never taken for the running message of the round before."""
    return await _notify(DELIVER_REPORT, f"dl:{delivery_id}:{round_}", delivery_id, None)


async def enqueue_digest(digest_id: str) -> bool:
    """A digest of owners' notices: one message while it is pending (its notices' messages all publish it;
    arq's job id keeps one), deferred by the digest itself until it is due."""
    return await _notify(DELIVER_DIGEST, f"nd:{digest_id}", digest_id, None)


async def _notify(function: str, arq_id: str, delivery_id: str, defer_until: datetime | None) -> bool:
    """Publish on the failed channel (deduplicated by `arq_id`); False when a message of that id is queued
    or running already, or, logged, when Redis is away (the scheduler re-publishes what MySQL says is due)."""
    try:
        pool = await get_pool()
        job = await pool.enqueue_job(
            function,
            delivery_id,
            _job_id=arq_id,
            _queue_name=get_settings().dead_letter_queue_name,
            _defer_until=defer_until,
        )
        return job is not None
    except Exception as exc:
        log.warning(
            "notification publish failed; the scheduler will re-publish",
            extra={"delivery_id": delivery_id, "function": function, "error": repr(exc)},
        )
        return False


async def is_queued(job_id: str, replay_count: int) -> bool:
    pool = await get_pool()
    return bool(await pool.exists(job_key_prefix + arq_job_id(job_id, replay_count)))


async def queue_lengths() -> dict[str, int]:
    """Messages waiting in Redis (due or deferred), by queue: `main` and `dead_letter`."""
    settings = get_settings()
    pool = await get_pool()
    async with pool.pipeline(transaction=False) as pipe:
        pipe.zcard(settings.queue_name)
        pipe.zcard(settings.dead_letter_queue_name)
        main, dead_letter = await pipe.execute()
    return {"main": int(main), "dead_letter": int(dead_letter)}
