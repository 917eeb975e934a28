"""SQL of notice digests: a notice joins its destination's open digest (or opens one), a sender leases and so
closes it, records its progress and its outcome (on the digest and its notices at once), the due ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from app.core.ids import new_id
from app.core.repository import Repository, table_of
from app.core.states import DeliveryStatus
from app.models import NoticeDigest, NoticeDigestSlot, ReportDelivery

DIGESTS = table_of(NoticeDigest)
digest = DIGESTS.c
SLOTS = table_of(NoticeDigestSlot)
slots = SLOTS.c
DELIVERIES = table_of(ReportDelivery)
delivery = DELIVERIES.c


class DigestRepository(Repository):
    async def add_slot(self, destination_id: str) -> None:
        """A new destination's slot (no digest yet): stagers lock it, never create it."""
        await self.session.execute(SLOTS.insert().values(destination_id=destination_id, digest_id=""))

    async def join(
        self,
        tenant: str,
        destination_id: str,
        notice_ids: Sequence[str],
        now: datetime,
        due_at: datetime,
        cap: int,
    ) -> str:
        """Put the notices `notice_ids` (just staged, all to `destination_id`) in the destination's open
        digest, or in a new one due at `due_at` when its newest is closed (leased) or full; the digest's id.

        Locks: the destination's slot row (its primary key: a record lock, never a gap), then its newest
        digest's row, to the end of the transaction; a sender's lease locks a digest's row only, so it waits
        for these notices and finds them all, and never the other way round. A slot another stager holds is
        skipped (SKIP LOCKED): the notices open a digest of their own rather than wait, so stagers that each
        stage several notices never wait for one another's slots (no cycle)."""
        candidate = new_id()
        held = select(slots.digest_id).where(slots.destination_id == destination_id)
        found_slot = (await self.session.execute(held.with_for_update(skip_locked=True))).one_or_none()
        if found_slot is None and (await self.session.execute(held)).one_or_none() is not None:
            # Another stager holds this destination's slot: waiting could close a cycle with it (each
            # transaction may stage several notices), so these notices open a digest of their own.
            await self._open(candidate, tenant, destination_id, due_at, now)
            return await self._joined(candidate, notice_ids)
        if found_slot is None:  # the destination's first notice: its slot is made (a new row)
            await self.session.execute(self._new_slot(destination_id, candidate))
            found_slot = (await self.session.execute(held.with_for_update())).one()
        digest_id = str(found_slot.digest_id)
        newest = select(digest.closed_at, digest.members).where(digest.id == digest_id).with_for_update()
        found = (await self.session.execute(newest)).one_or_none()
        if found is None or found.closed_at is not None or found.members >= cap:
            digest_id = candidate if found is None else new_id()
            await self._open(digest_id, tenant, destination_id, due_at, now)
            moved = SLOTS.update().where(slots.destination_id == destination_id).values(digest_id=digest_id)
            await self.session.execute(moved)
        return await self._joined(digest_id, notice_ids)

    def _new_slot(self, destination_id: str, digest_id: str) -> Any:
        if self.session.get_bind().dialect.name == "sqlite":
            return sqlite_insert(SLOTS).values(destination_id=destination_id, digest_id=digest_id)
        slot = mysql_insert(SLOTS).values(destination_id=destination_id, digest_id=digest_id)
        return slot.on_duplicate_key_update(destination_id=slots.destination_id)

    async def _open(
        self, digest_id: str, tenant: str, destination_id: str, due_at: datetime, now: datetime
    ) -> None:
        opened = DIGESTS.insert().values(
            id=digest_id, tenant=tenant, destination_id=destination_id, members=0,
            status=DeliveryStatus.PENDING.value, tries=0, parts_sent=0, next_attempt_at=due_at,
            created_at=now,
        )  # fmt: skip
        await self.session.execute(opened)

    async def _joined(self, digest_id: str, notice_ids: Sequence[str]) -> str:
        grown = (
            DIGESTS.update().where(digest.id == digest_id).values(members=digest.members + len(notice_ids))
        )
        await self.session.execute(grown)
        link = DELIVERIES.update().where(delivery.id.in_(list(notice_ids))).values(digest_id=digest_id)
        await self.session.execute(link)
        return digest_id

    async def get(self, digest_id: str) -> NoticeDigest | None:
        stmt = select(NoticeDigest).where(digest.id == digest_id).execution_options(populate_existing=True)
        return await self.first(stmt, NoticeDigest)

    async def notices(self, digest_id: str) -> list[ReportDelivery]:
        """The digest's notices, oldest first (the order every try renders them in)."""
        stmt = select(ReportDelivery).where(delivery.digest_id == digest_id).order_by(delivery.id)
        return await self.all(stmt.execution_options(populate_existing=True), ReportDelivery)

    async def lease(self, row: NoticeDigest, now: datetime, until: datetime, token: str) -> bool:
        """Take the right to send this try (a compare-and-set on the tries and parts read, as deliveries'
        lease) and close the digest: no notice joins it from here on, every try sends the same ones. It
        locks the digest's row only (no indexed column changes): a stager, which locks the `newest_for`
        entry first and the row second, only ever waits for it."""
        stmt = (
            DIGESTS.update()
            .where(
                digest.id == row.id,
                digest.status == DeliveryStatus.PENDING.value,
                digest.tries == row.tries,
                digest.parts_sent == row.parts_sent,
                digest.next_attempt_at <= now,
                or_(digest.lease_until.is_(None), digest.lease_until <= now),
            )
            .values(closed_at=func.coalesce(digest.closed_at, now), lease_until=until, lease_token=token)
        )
        return await self.rowcount(stmt) == 1

    async def progress(self, row: NoticeDigest, token: str, parts_sent: int, until: datetime) -> bool:
        """By the lease's holder: `parts_sent` messages accepted so far, the lease renewed for the next one.
        False: the lease is not ours any more (stop sending)."""
        held = DIGESTS.update().where(digest.id == row.id, digest.lease_token == token)
        return await self.rowcount(held.values(parts_sent=parts_sent, lease_until=until)) == 1

    async def release(self, row: NoticeDigest, token: str, parts_sent: int, next_at: datetime) -> int:
        """By the lease's holder: wait for a robot's minute without spending a try."""
        held = DIGESTS.update().where(digest.id == row.id, digest.lease_token == token)
        values = {
            "parts_sent": parts_sent,
            "next_attempt_at": next_at,
            "lease_until": None,
            "lease_token": None,
        }
        return await self.rowcount(held.values(**values))

    async def record_try(
        self,
        row: NoticeDigest,
        token: str,
        status: DeliveryStatus,
        error: str | None,
        next_at: datetime | None,
        sent_at: datetime | None,
        accepted: Sequence[str] = (),
        now: datetime | None = None,
    ) -> int:
        """One try's outcome on the digest and, in the same transaction, on each of its notices (what the job
        pages and the API show): by the lease's holder only (its token), so a record that comes after the
        lease was lost changes nothing, and no notice is ever recorded apart from its digest. The notices of
        messages already accepted (`accepted`, sent at `now`) are recorded sent whatever the outcome."""
        values: dict[str, Any] = {
            "status": status.value,
            "tries": row.tries + 1,
            "last_error": error[:500] if error else None,
            "sent_at": sent_at,
        }
        if next_at is not None:
            values["next_attempt_at"] = next_at
        held = DIGESTS.update().where(digest.id == row.id, digest.lease_token == token)
        if await self.rowcount(held.values(**values, lease_until=None, lease_token=None)) != 1:
            return 0
        told = DELIVERIES.update().where(delivery.digest_id == row.id, delivery.status == row.status.value)
        if accepted and status != DeliveryStatus.SENT:
            done = {**values, "status": DeliveryStatus.SENT.value, "last_error": None, "sent_at": now}
            await self.session.execute(told.where(delivery.id.in_(list(accepted))).values(**done))
        await self.session.execute(told.values(**values))
        return 1

    async def due(self, now: datetime, limit: int) -> list[str]:
        """Pending digests that are due and not leased (an index range of the pending ones)."""
        stmt = (
            select(digest.id)
            .where(
                digest.status == DeliveryStatus.PENDING.value,
                digest.next_attempt_at <= now,
                or_(digest.lease_until.is_(None), digest.lease_until <= now),
            )
            .order_by(digest.next_attempt_at)
            .limit(limit)
        )
        return await self.all(stmt, str)
