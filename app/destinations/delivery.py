"""Report deliveries: staged with a job's `done` transition (one outbox row a destination), sent once each by
a sender holding the row's lease, retried with backoff, skipped when empty, resent on request. Owners'
notices are staged here too, each in its destination's digest (app.destinations.digests sends those).

Sent once: a sender leases the row (a compare-and-set) before the send and records the answer within the
lease, riding out a database outage of up to RECORD_FOR_S; only after a longer one may the row be sent again
(at least once, never silently lost). A robot's per-minute limit defers a send without spending a try.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.core import redis_pool
from app.core.config import get_settings
from app.core.db import is_db_outage, outage_retrying, session_scope
from app.core.errors import NotFound
from app.core.ids import new_id
from app.core.states import DeliveryStatus, JobStatus
from app.core.tenancy import EVERY_TENANT, TenantScope
from app.core.times import utcnow
from app.destinations.digest_repository import DigestRepository
from app.destinations.messages import build_sender, notice_message, render
from app.destinations.repository import DeliveryRepository, DestinationRepository
from app.destinations.senders.base import SendError
from app.dispatch import queue
from app.models import ReportDelivery, ReportJob

log = logging.getLogger(__name__)

RECORD_FOR_S = 30.0  # how long recording a send's answer rides out a database outage
LEASE_MARGIN_S = 30.0
PER_MINUTE = {"dingtalk": 20, "wecom": 20, "feishu": 100}  # the robots' own limits, per robot
DIGEST_MAX = 100  # notices a digest carries at most; the next one opens another


@dataclass(frozen=True)
class Notice:
    """A message to a job's or a schedule's owners about `subject` (sent once a destination)."""

    tenant: str
    event: str  # dead | late | missed
    subject: str
    destination_ids: list[str]
    title: str
    lines: list[tuple[str, str]]
    job_id: str | None = None
    schedule_id: str | None = None


@dataclass(frozen=True)
class DeliveryOutcome:
    detail: str
    retry_in_s: float | None = None


def lease_s() -> float:
    """One send (its timeout, a few times over for connect/write/read) and its record, with a margin."""
    return get_settings().delivery_timeout_s * 4 + RECORD_FOR_S + LEASE_MARGIN_S


async def stage_deliveries(session: AsyncSession, job: ReportJob) -> list[str]:
    """The outbox rows of a job that just ended `done`, in that transition's transaction: one a destination
    of its `deliver_to` that still exists; returns their ids to publish once it commits."""
    if job.status != JobStatus.DONE or not job.deliver_to:
        return []
    wanted = [item["destination_id"] for item in job.deliver_to]
    targets = {d.id: d for d in await DestinationRepository(session).named(job.tenant, wanted)}
    now = utcnow()
    rows = [
        ReportDelivery(
            id=new_id(),
            event="report",
            subject=f"report:{job.id}:{job.replay_count}",
            job_id=job.id,
            schedule_id=job.schedule_id,
            tenant=job.tenant,
            destination_id=item["destination_id"],
            destination_name=targets[item["destination_id"]].name,
            kind=targets[item["destination_id"]].kind,
            run=job.replay_count,
            overrides={k: v for k, v in item.items() if k != "destination_id"},
            next_attempt_at=now,
            created_at=now,
        )
        for item in job.deliver_to
        if item["destination_id"] in targets
    ]
    await DeliveryRepository(session).add_all(rows)
    return [row.id for row in rows]


async def stage_notice(session: AsyncSession, notice: Notice) -> list[str]:
    """Outbox rows of an owners' notice, one a destination, in the transaction that found the event; a
    subject a destination has had already is left out (the unique key): each notice goes out once. Each
    joins its destination's open digest (app.destinations.digests), which carries it."""
    targets = await DestinationRepository(session).named(notice.tenant, notice.destination_ids)
    if not targets:
        return []
    targets.sort(key=lambda target: target.id)  # one notice's slots in one order (others' are skipped)
    now = utcnow()
    due_at = now + timedelta(seconds=get_settings().notice_coalesce_s)  # when its digest goes
    rows = [
        {
            "id": new_id(),
            "event": notice.event,
            "subject": notice.subject,
            "job_id": notice.job_id,
            "schedule_id": notice.schedule_id,
            "facts": {"title": notice.title, "lines": [list(line) for line in notice.lines]},
            "tenant": notice.tenant,
            "destination_id": target.id,
            "destination_name": target.name,
            "kind": target.kind,
            "run": 0,
            "overrides": {},
            "status": DeliveryStatus.PENDING.value,
            "tries": 0,
            "round": 0,
            "next_attempt_at": due_at,
            "created_at": now,
        }
        for target in targets
    ]
    staged = await DeliveryRepository(session).add_new(rows)
    digests = DigestRepository(session)
    for row in rows:
        if row["id"] in staged:
            destination_id = str(row["destination_id"])
            await digests.join(notice.tenant, destination_id, [str(row["id"])], now, due_at, DIGEST_MAX)
    return staged


async def publish(delivery_ids: list[str]) -> None:
    """The queue message of each new delivery (its first round)."""
    for delivery_id in delivery_ids:
        await queue.enqueue_delivery(delivery_id, 0)


async def deliver(delivery_id: str) -> DeliveryOutcome:
    """Send one due delivery, if this sender wins its lease; record the answer."""
    settings = get_settings()
    now = utcnow()
    async with session_scope() as session:
        repo = DeliveryRepository(session)
        row = await repo.get(delivery_id)
        if row is None or row.status != DeliveryStatus.PENDING:
            return DeliveryOutcome("nothing to deliver")
        if row.digest_id is not None:  # a notice: its digest's message sends it (deduplicated in arq)
            await queue.enqueue_digest(row.digest_id)
            return DeliveryOutcome("goes with its digest")
        if row.next_attempt_at > now:
            return DeliveryOutcome("not due", retry_in_s=(row.next_attempt_at - now).total_seconds())
        job, schedule = await repo.job_and_schedule(row.job_id)
        target = await DestinationRepository(session).get(row.destination_id, EVERY_TENANT)
    if job is None and row.event == "report":
        return DeliveryOutcome("the job is gone")
    if job is not None and row.overrides.get("skip_when_empty") and job.output_rows == 0:
        async with session_scope() as session:
            await DeliveryRepository(session).skip(row, "skipped: the report wrote no rows")
        return DeliveryOutcome("skipped (empty report)")
    if target is not None and (per_minute := PER_MINUTE.get(target.kind)):
        wait_s = await redis_pool.take_rate_token(f"destination:{target.id}", per_minute)
        if wait_s is not None:
            return DeliveryOutcome("the robot's minute is full", retry_in_s=float(wait_s))
    token = new_id()
    async with session_scope() as session:
        leased = await DeliveryRepository(session).lease(row, now, now + timedelta(seconds=lease_s()), token)
    if not leased:
        return DeliveryOutcome("another sender has it")
    error, final = None, target is None
    if target is None:
        error = "destination deleted"
    else:
        try:
            if row.event == "report" and job is not None:
                message = await render(job, schedule, row, target, settings)
            else:
                message = notice_message(row)
            await build_sender(target, settings, row.id, row.overrides).send(message)
        except SendError as exc:
            error = str(exc)
        except ValueError as exc:  # a message the destination can never take (a header it refuses)
            error, final = f"not sendable: {exc}", True
    return await _recorded(row, token, error, final)


def after_try(
    tries: int, error: str | None, final: bool, now: datetime
) -> tuple[DeliveryStatus, datetime | None, str]:
    """What a try leaves (its `tries`-th): sent, failed for good, or pending again after the backoff."""
    settings = get_settings()
    if error is None:
        return DeliveryStatus.SENT, None, "sent"
    if final or tries >= settings.delivery_max_attempts:
        return DeliveryStatus.FAILED, None, f"failed after {tries} tries: {error}"
    delay_s = settings.delivery_backoff.delay_s(tries)
    return DeliveryStatus.PENDING, now + timedelta(seconds=delay_s), f"try {tries} failed: {error}"


async def _recorded(row: ReportDelivery, token: str, error: str | None, final: bool) -> DeliveryOutcome:
    now = utcnow()
    status, next_at, detail = after_try(row.tries + 1, error, final, now)
    try:
        async for attempt in outage_retrying(RECORD_FOR_S):
            with attempt:
                async with session_scope() as session:
                    sent_at = now if error is None else None
                    await DeliveryRepository(session).record_try(row, token, status, error, next_at, sent_at)
    except Exception as exc:
        if is_db_outage(exc) and error is None:
            log.error(
                "delivery sent but not recorded: MySQL unreachable for over %g s; it may be sent again",
                RECORD_FOR_S,
                extra={"job_id": row.job_id, "delivery_id": row.id},
            )
        raise
    if status == DeliveryStatus.FAILED:
        log.warning("delivery given up", extra={"job_id": row.job_id, "delivery_id": row.id, "error": error})
    retry_in_s = (next_at - now).total_seconds() if next_at is not None else None
    return DeliveryOutcome(detail, retry_in_s=retry_in_s)


async def job_deliveries(job_id: str, scope: TenantScope) -> list[ReportDelivery]:
    async with session_scope() as session:
        repo = DeliveryRepository(session)
        job, _ = await repo.job_and_schedule(job_id)
        if job is None or (scope.tenant is not None and job.tenant != scope.tenant):
            raise NotFound(f"No job {job_id!r}.")
        return await repo.of_job(job_id)


async def resend(job_id: str, delivery_id: str, scope: TenantScope) -> ReportDelivery:
    """Send a delivery once more (sent, failed or skipped: a person asked); a pending one is left as is."""
    rows = {row.id: row for row in await job_deliveries(job_id, scope)}
    if delivery_id not in rows:
        raise NotFound(f"No delivery {delivery_id!r} of job {job_id}.")
    async with session_scope() as session:
        repo = DeliveryRepository(session)
        await repo.resend(delivery_id, job_id, utcnow())
        row = await repo.get(delivery_id)
    assert row is not None
    await queue.enqueue_delivery(delivery_id, row.round)  # a round of its own: never deduplicated away
    return row


async def republish_due(limit: int = 500) -> int:
    """Publish pending deliveries that are due (a lost message, a flushed Redis, a sender that died with its
    lease); arq's job id dedups them."""
    now: datetime = utcnow()
    async with session_scope() as session:
        due = await DeliveryRepository(session).due(now, limit)
        digests = await DigestRepository(session).due(now, limit)
    published = 0
    for delivery_id, round_ in due:
        if await queue.enqueue_delivery(delivery_id, round_):
            published += 1
    for digest_id in digests:
        if await queue.enqueue_digest(digest_id):
            published += 1
    return published
