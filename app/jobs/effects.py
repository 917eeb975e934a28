"""What a job's terminal transition sets off: its completion callback, its deliveries to destinations (when
done) and the next job of its ordering key.

Staged inside the transition's own transaction (the outbox rows), published after the commit.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.callbacks.service import stage_delivery
from app.core.db import session_scope
from app.core.tenancy import EVERY_TENANT
from app.destinations import delivery, notices
from app.dispatch import queue
from app.jobs.repository import JobRepository
from app.jobs.schemas import JobPublic


@dataclass(frozen=True)
class TerminalEffects:
    """What must happen after a terminal transition commits: its callback, its deliveries, and its ordering
    successor."""

    delivery_id: str | None = None
    ordering: tuple[str, str, str] | None = None  # tenant, ordering key, the job that finished
    report_deliveries: tuple[str, ...] = ()

    async def publish(self) -> None:
        if self.delivery_id is not None:
            await queue.enqueue_callback(self.delivery_id)
        await delivery.publish(list(self.report_deliveries))
        if self.ordering is not None:
            await wake_next_in_order(*self.ordering)


NO_EFFECTS = TerminalEffects()


async def stage_terminal_effects(session: AsyncSession, job_id: str) -> TerminalEffects:
    """Read the job as the transition left it and stage its effects in the same transaction."""
    job = await JobRepository(session).get_job(job_id, EVERY_TENANT)
    if job is None:
        return NO_EFFECTS
    delivery_id = None
    if job.callback_url:
        document = JobPublic.of(job).document()
        delivery_id = await stage_delivery(
            session, job.id, job.tenant, job.callback_url, job.status.value, document
        )
    ordering = (job.tenant, job.ordering_key, job.id) if job.ordering_key else None
    staged = await delivery.stage_deliveries(session, job)
    staged += await notices.slow(session, job)
    return TerminalEffects(delivery_id, ordering, tuple(staged))


async def wake_next_in_order(tenant: str, ordering_key: str, woken_by: str) -> None:
    """Enqueue the earliest pending job of an ordering key (it re-checks its predecessors itself).

    A job has one message (app/dispatch/lanes.py): a wake-up of a job that has one adds none, and one whose
    message is running asks it to run once more if it ends without starting the job (a Blocked start racing
    this finish). The message id naming the predecessor only tells, in Redis, who woke it."""
    async with session_scope() as session:
        job = await JobRepository(session).next_in_order(tenant, ordering_key)
    if job is not None:
        await queue.enqueue_run(
            job.id,
            job.replay_count,
            suffix=f"after-{woken_by}",
            traceparent=job.traceparent,
            lane=queue.lane_of(job),
        )
