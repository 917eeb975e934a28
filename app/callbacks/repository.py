"""SQL of completion-callback deliveries (the outbox) and the job's mirror of its latest delivery.

Recording a try is a compare-and-set on the try count, so two deliverers of one row cannot both count it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select

from app.core.repository import Repository, table_of
from app.core.states import CallbackStatus
from app.models import CallbackDelivery, ReportJob

DELIVERIES = table_of(CallbackDelivery)
JOBS = table_of(ReportJob)
delivery = DELIVERIES.c
job = JOBS.c


class CallbackRepository(Repository):
    async def add_delivery(self, row: CallbackDelivery) -> None:
        self.session.add(row)
        await self.session.flush()
        await self.session.execute(
            JOBS.update()
            .where(job.id == row.job_id)
            .values(
                callback_status=CallbackStatus.PENDING.value, callback_attempts=0, callback_last_error=None
            )
        )

    async def get_delivery(self, delivery_id: str) -> CallbackDelivery | None:
        stmt = (
            select(CallbackDelivery)
            .where(delivery.id == delivery_id)
            .execution_options(populate_existing=True)
        )
        return await self.first(stmt, CallbackDelivery)

    async def job_traceparent(self, job_id: str) -> str | None:
        """The trace context stored on the delivery's job (its callback span joins that trace)."""
        return await self.first(select(job.traceparent).where(job.id == job_id), str)

    async def record_try(
        self,
        row: CallbackDelivery,
        status: CallbackStatus,
        attempts: int,
        error: str | None,
        next_at: datetime | None,
        delivered_at: datetime | None,
    ) -> int:
        values: dict[str, Any] = {
            "status": status.value,
            "attempts": attempts,
            "last_error": error,
            "delivered_at": delivered_at,
        }
        if next_at is not None:
            values["next_attempt_at"] = next_at
        stmt = (
            DELIVERIES.update()
            .where(
                delivery.id == row.id,
                delivery.attempts == row.attempts,
                delivery.status == CallbackStatus.PENDING.value,
            )
            .values(**values)
        )
        changed = await self.rowcount(stmt)
        if changed:
            await self.session.execute(
                JOBS.update()
                .where(job.id == row.job_id)
                .values(
                    callback_status=status.value,
                    callback_attempts=attempts,
                    callback_last_error=error[:500] if error else None,
                )
            )
        return changed

    async def due_delivery_ids(self, now: datetime, limit: int) -> list[str]:
        stmt = (
            select(delivery.id)
            .where(delivery.status == CallbackStatus.PENDING.value, delivery.next_attempt_at <= now)
            .order_by(delivery.next_attempt_at)
            .limit(limit)
        )
        return await self.all(stmt, str)
