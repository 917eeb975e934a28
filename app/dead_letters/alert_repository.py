"""SQL of alert deliveries: one row per (dead letter, sink) with its own tries, backoff and budget,
and the letter's alert summary mirrored from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, insert, or_, select

from app.core.repository import Repository, table_of
from app.core.states import AlertStatus
from app.models import AlertDelivery, DeadLetter

LETTERS = table_of(DeadLetter)
DELIVERIES = table_of(AlertDelivery)
letter = LETTERS.c
delivery = DELIVERIES.c


class AlertRepository(Repository):
    async def letters_missing_delivery(self, sink: str, limit: int) -> list[str]:
        """Pending letters (oldest first) that have no delivery row for `sink` yet."""
        has_row = select(delivery.id).where(delivery.letter_id == letter.id, delivery.sink == sink).exists()
        stmt = (
            select(letter.id)
            .where(letter.alert_status == AlertStatus.PENDING.value, ~has_row)
            .order_by(letter.created_at, letter.id)
            .limit(limit)
        )
        return await self.all(stmt, str)

    async def add_deliveries(self, sink: str, letter_ids: Sequence[str], now: datetime) -> None:
        if letter_ids:
            rows = [
                {"letter_id": i, "sink": sink, "status": AlertStatus.PENDING, "created_at": now}
                for i in letter_ids
            ]
            await self.session.execute(insert(DELIVERIES), rows)

    async def due_deliveries(
        self, sink: str, now: datetime, limit: int
    ) -> list[tuple[AlertDelivery, DeadLetter]]:
        """A sink's due pending deliveries with their (still pending) letters, oldest letter first."""
        stmt = (
            select(AlertDelivery, DeadLetter)
            .join(DeadLetter, delivery.letter_id == letter.id)
            .where(
                delivery.sink == sink,
                delivery.status == AlertStatus.PENDING.value,
                or_(delivery.next_attempt_at.is_(None), delivery.next_attempt_at <= now),
                letter.alert_status == AlertStatus.PENDING.value,
            )
            .order_by(letter.created_at, letter.id)
            .limit(limit)
        )
        return [(row[0], row[1]) for row in (await self.session.execute(stmt)).all()]

    async def messages_since(self, sink: str, since: datetime) -> tuple[int, datetime | None]:
        """How many distinct messages `sink` accepted since `since`, and when the oldest of them went."""
        stmt = select(func.count(func.distinct(delivery.message_id)), func.min(delivery.sent_at)).where(
            delivery.sink == sink, delivery.sent_at >= since, delivery.message_id.is_not(None)
        )
        count, oldest = (await self.session.execute(stmt)).one()
        if oldest is not None and oldest.tzinfo is None:
            oldest = oldest.replace(tzinfo=UTC)
        return int(count or 0), oldest

    async def mark_sent(self, sink: str, letter_ids: Sequence[str], message_id: str, now: datetime) -> int:
        stmt = (
            DELIVERIES.update()
            .where(
                delivery.letter_id.in_(list(letter_ids)),
                delivery.sink == sink,
                delivery.status == AlertStatus.PENDING.value,
            )
            .values(
                status=AlertStatus.SENT.value,
                sent_at=now,
                message_id=message_id,
                attempts=delivery.attempts + 1,
                next_attempt_at=None,
                last_error=None,
            )
        )
        return await self.rowcount(stmt)

    async def mark_failed(self, sink: str, letter_ids: Sequence[str], next_at: datetime, error: str) -> int:
        stmt = (
            DELIVERIES.update()
            .where(
                delivery.letter_id.in_(list(letter_ids)),
                delivery.sink == sink,
                delivery.status == AlertStatus.PENDING.value,
            )
            .values(attempts=delivery.attempts + 1, next_attempt_at=next_at, last_error=error[:500])
        )
        return await self.rowcount(stmt)

    async def letters_alerted_by_all(
        self, sinks: Sequence[str], letter_ids: Sequence[str] | None, limit: int
    ) -> list[str]:
        """Pending letters that every one of `sinks` has accepted a message for."""
        names = sorted(set(sinks))
        accepted = (
            select(func.count(delivery.id))
            .where(
                delivery.letter_id == letter.id,
                delivery.sink.in_(names),
                delivery.status == AlertStatus.SENT.value,
            )
            .correlate(LETTERS)
            .scalar_subquery()
        )
        stmt = select(letter.id).where(
            letter.alert_status == AlertStatus.PENDING.value, accepted == len(names)
        )
        if letter_ids is not None:
            stmt = stmt.where(letter.id.in_(list(letter_ids)))
        return await self.all(stmt.limit(limit), str)

    async def deliveries_of(self, letter_ids: Sequence[str], sinks: Sequence[str]) -> list[AlertDelivery]:
        stmt = select(AlertDelivery).where(
            delivery.letter_id.in_(list(letter_ids)), delivery.sink.in_(list(sinks))
        )
        return await self.all(stmt, AlertDelivery)

    async def update_pending_letters(self, letter_ids: Sequence[str], values: dict[str, Any]) -> int:
        """Set pending letters' alert summary (status, sent_at, attempts, next try, last error)."""
        stmt = (
            LETTERS.update()
            .where(letter.id.in_(list(letter_ids)), letter.alert_status == AlertStatus.PENDING.value)
            .values(**values)
        )
        return await self.rowcount(stmt)
