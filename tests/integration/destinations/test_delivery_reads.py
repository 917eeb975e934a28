"""What the delivery reads cost on MariaDB: the console's failing destinations read the last day's failed
deliveries (a range of the (status, created_at) index), not every failed delivery kept."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import text

from app.core.db import session_scope
from app.core.ids import new_id
from app.core.states import DeliveryStatus
from app.core.tenancy import EVERY_TENANT
from app.core.times import utcnow
from app.destinations.repository import DeliveryRepository
from app.models import ReportDelivery
from tests.utils.job_lists import rows_read

OLD_FAILED = 2_000


def failed(created_at: Any, n: int) -> ReportDelivery:
    return ReportDelivery(
        id=new_id(), event="missed", subject=f"missed:reads:{n}", tenant="acme", destination_id="d" * 26,
        destination_name="ops", kind="webhook", status=DeliveryStatus.FAILED, tries=10,
        next_attempt_at=created_at, last_error="webhook answered HTTP 500", created_at=created_at,
    )  # fmt: skip


async def test_failing_destinations_read_the_days_failures_not_every_failure_kept(env: Any) -> None:
    now = utcnow()
    async with session_scope() as session:
        session.add_all(failed(now - timedelta(days=30, seconds=n), n) for n in range(OLD_FAILED))
        session.add_all(failed(now - timedelta(minutes=n), OLD_FAILED + n) for n in range(3))
    async with session_scope() as session:
        await session.execute(text("ANALYZE TABLE report_deliveries"))
        before = await rows_read(session)
        [failing] = await DeliveryRepository(session).failing_destinations(
            EVERY_TENANT, now - timedelta(days=1)
        )
        read = await rows_read(session) - before
    assert failing.failed == 3
    assert read < 50, f"{read} rows read for 3 failed deliveries of the day"
