"""SQL of destinations (by id or name within a tenant, a page, replace, delete) and of report deliveries
(stage, lease, record a try, resend, the due ones, a job's list).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, or_, select
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from app.core.repository import Repository, table_of
from app.core.states import DeliveryStatus
from app.core.tenancy import TenantScope
from app.models import Destination, NotifyRoute, ReportDelivery, ReportJob, Schedule, ScheduleRun

ROUTES = table_of(NotifyRoute)
ROUTES_A_TENANT = 100
ROUTES_READ_MAX = 100_000
DESTINATIONS = table_of(Destination)
dest = DESTINATIONS.c
DELIVERIES = table_of(ReportDelivery)
delivery = DELIVERIES.c
RUNS = table_of(ScheduleRun)
jobs = table_of(ReportJob).c
run = RUNS.c


@dataclass(frozen=True)
class FailingDestination:
    name: str
    kind: str
    tenant: str
    failed: int
    last_failed_at: datetime
    last_error: str | None


class DestinationRepository(Repository):
    async def add(self, row: Destination) -> None:
        self.session.add(row)
        await self.session.flush()

    async def get(self, destination_id: str, scope: TenantScope) -> Destination | None:
        stmt = select(Destination).where(dest.id == destination_id).execution_options(populate_existing=True)
        if scope.tenant is not None:
            stmt = stmt.where(dest.tenant == scope.tenant)
        return await self.first(stmt, Destination)

    async def by_name(self, tenant: str, name: str) -> Destination | None:
        return await self.first(
            select(Destination).where(dest.tenant == tenant, dest.name == name), Destination
        )

    async def named(self, tenant: str, refs: Sequence[str]) -> list[Destination]:
        """The tenant's destinations whose id or name is one of `refs` (one read, the unique key)."""
        if not refs:
            return []
        stmt = select(Destination).where(
            dest.tenant == tenant, or_(dest.id.in_(list(refs)), dest.name.in_(list(refs)))
        )
        return await self.all(stmt, Destination)

    async def page(self, scope: TenantScope, after_id: str | None, limit: int) -> list[Destination]:
        stmt = select(Destination).order_by(dest.id).limit(limit)
        if scope.tenant is not None:
            stmt = stmt.where(dest.tenant == scope.tenant)
        if after_id:
            stmt = stmt.where(dest.id > after_id)
        return await self.all(stmt, Destination)

    async def replace(self, row: Destination, values: dict[str, Any]) -> int:
        stmt = DESTINATIONS.update().where(dest.id == row.id).values(**values)
        return await self.rowcount(stmt)

    async def remove(self, destination_id: str) -> int:
        return await self.rowcount(delete(DESTINATIONS).where(dest.id == destination_id))

    async def add_route(self, row: NotifyRoute) -> None:
        self.session.add(row)
        await self.session.flush()

    async def routes(self, scope: TenantScope) -> list[NotifyRoute]:
        stmt = select(NotifyRoute).order_by(ROUTES.c.id).limit(ROUTES_A_TENANT)
        if scope.tenant is not None:
            stmt = stmt.where(ROUTES.c.tenant == scope.tenant)
        return await self.all(stmt, NotifyRoute)

    async def routes_for(self, tenant: str, report_type: str, event: str) -> list[str]:
        """The destinations a tenant's routes send this event of this type to (its few routes, by index)."""
        of_type = or_(ROUTES.c.report_type.is_(None), ROUTES.c.report_type == report_type)
        stmt = select(NotifyRoute).where(ROUTES.c.tenant == tenant, of_type)
        out: list[str] = []
        for route in await self.all(stmt.limit(ROUTES_A_TENANT), NotifyRoute):
            if event in route.events:
                out += [d for d in route.destination_ids if d not in out]
        return out

    async def slow_route_keys(self) -> list[tuple[str, str | None]]:
        """(tenant, report type or None) of each route asking for slow runs (a small table, read whole)."""
        rows = await self.all(select(NotifyRoute).limit(ROUTES_READ_MAX), NotifyRoute)
        return [(r.tenant, r.report_type) for r in rows if "slow" in r.events]

    async def notifying_schedule_keys(self) -> list[tuple[str, str]]:
        """(tenant, report type) of the schedules with owners (`notify_to`): they hear their jobs' slow runs
        (a configuration table; the rows that name owners, read whole)."""
        table = table_of(Schedule)
        stmt = (
            select(table.c.tenant, table.c.report_type, table.c.notify_to)
            .where(table.c.notify_to.is_not(None))
            .limit(ROUTES_READ_MAX)
        )
        rows = (await self.session.execute(stmt)).all()
        return list({(tenant, rtype) for tenant, rtype, owners in rows if owners})

    async def remove_route(self, route_id: str, scope: TenantScope) -> int:
        stmt = delete(ROUTES).where(ROUTES.c.id == route_id)
        if scope.tenant is not None:
            stmt = stmt.where(ROUTES.c.tenant == scope.tenant)
        return await self.rowcount(stmt)


class DeliveryRepository(Repository):
    async def add_all(self, rows: Sequence[ReportDelivery]) -> None:
        self.session.add_all(rows)
        await self.session.flush()

    async def add_new(self, rows: Sequence[dict[str, Any]]) -> list[str]:
        """Insert the rows whose (subject, destination) has none yet, the others left out (not errors);
        the ids of those inserted. Only a duplicate key is let go: any other error (a value too long, a
        missing column) is raised, where `INSERT IGNORE` would have cut or defaulted it with a warning."""
        if not rows:
            return []
        stmt: Any
        if self.session.get_bind().dialect.name == "sqlite":
            stmt = sqlite_insert(DELIVERIES).on_conflict_do_nothing()
        else:
            my = mysql_insert(DELIVERIES)
            stmt = my.on_duplicate_key_update(id=delivery.id)  # a no-op on the row already there
        await self.session.execute(stmt, list(rows))
        ids = [str(row["id"]) for row in rows]
        return await self.all(select(delivery.id).where(delivery.id.in_(ids)), str)

    async def get(self, delivery_id: str) -> ReportDelivery | None:
        stmt = (
            select(ReportDelivery).where(delivery.id == delivery_id).execution_options(populate_existing=True)
        )
        return await self.first(stmt, ReportDelivery)

    async def of_job(self, job_id: str) -> list[ReportDelivery]:
        stmt = select(ReportDelivery).where(delivery.job_id == job_id).order_by(delivery.id)
        return await self.all(stmt, ReportDelivery)

    async def lease(self, row: ReportDelivery, now: datetime, until: datetime, token: str) -> bool:
        """Take the right to send this try: pending, due, not leased by another sender (or its lease ran
        out), and still at the round and try count read (a compare-and-set: two senders never both win).
        `token` marks the lease: only its holder records the answer."""
        stmt = (
            DELIVERIES.update()
            .where(
                delivery.id == row.id,
                delivery.status == DeliveryStatus.PENDING.value,
                delivery.tries == row.tries,
                delivery.round == row.round,
                delivery.next_attempt_at <= now,
                or_(delivery.lease_until.is_(None), delivery.lease_until <= now),
            )
            .values(lease_until=until, lease_token=token)
        )
        return await self.rowcount(stmt) == 1

    async def record_try(
        self,
        row: ReportDelivery,
        token: str,
        status: DeliveryStatus,
        error: str | None,
        next_at: datetime | None,
        sent_at: datetime | None,
    ) -> int:
        """One try's result, by the lease's holder only (its token): running it again after a commit whose
        answer was lost changes nothing, nor does it undo a resend that came since (a new round, no token)."""
        values: dict[str, Any] = {
            "status": status.value,
            "tries": row.tries + 1,
            "last_error": error[:500] if error else None,
            "lease_until": None,
            "lease_token": None,
            "sent_at": sent_at,
        }
        if next_at is not None:
            values["next_attempt_at"] = next_at
        held = DELIVERIES.update().where(delivery.id == row.id, delivery.lease_token == token)
        return await self.rowcount(held.values(**values))

    async def skip(self, row: ReportDelivery, reason: str) -> int:
        stmt = (
            DELIVERIES.update()
            .where(delivery.id == row.id, delivery.status == DeliveryStatus.PENDING.value)
            .values(status=DeliveryStatus.SKIPPED.value, last_error=reason, lease_until=None)
        )
        return await self.rowcount(stmt)

    async def resend(self, delivery_id: str, job_id: str, now: datetime) -> int:
        """Make a sent, failed or skipped delivery pending again (a person asked for it once more)."""
        stmt = (
            DELIVERIES.update()
            .where(
                delivery.id == delivery_id,
                delivery.job_id == job_id,
                delivery.status != DeliveryStatus.PENDING.value,
            )
            .values(
                status=DeliveryStatus.PENDING.value,
                next_attempt_at=now,
                lease_until=None,
                lease_token=None,
                tries=0,
                round=delivery.round + 1,
                digest_id=None,  # sent alone: its digest (sent or failed for good) is not tried again
            )
        )
        return await self.rowcount(stmt)

    async def due(self, now: datetime, limit: int) -> list[tuple[str, int]]:
        """Pending deliveries that are due and not leased (an index range of pending ones): id and round."""
        stmt = (
            select(delivery.id, delivery.round)
            .where(
                delivery.status == DeliveryStatus.PENDING.value,
                delivery.next_attempt_at <= now,
                or_(delivery.lease_until.is_(None), delivery.lease_until <= now),
                delivery.digest_id.is_(None),  # a digest's notices go with it
            )
            .order_by(delivery.next_attempt_at)
            .limit(limit)
        )
        return [(str(i), int(r)) for i, r in (await self.session.execute(stmt)).all()]

    async def failing_destinations(self, scope: TenantScope, since: datetime) -> list[FailingDestination]:
        """Destinations with deliveries given up (`failed`) created since `since`: how many, the newest
        error. Reads the failed rows of the window only (a range of the (status, created_at) index)."""
        stmt = (
            select(
                delivery.destination_name,
                delivery.kind,
                delivery.tenant,
                func.count(),
                func.max(delivery.created_at),
                func.max(delivery.last_error),
            )
            .where(delivery.status == DeliveryStatus.FAILED.value, delivery.created_at >= since)
            .group_by(delivery.destination_id, delivery.destination_name, delivery.kind, delivery.tenant)
        )
        if scope.tenant is not None:
            stmt = stmt.where(delivery.tenant == scope.tenant)
        return [FailingDestination(*row) for row in (await self.session.execute(stmt)).all()]

    async def job_and_schedule(self, job_id: str | None) -> tuple[ReportJob | None, Schedule | None]:
        """What a delivery's message tells: the job as it ended, and the schedule that made it (if any)."""
        if job_id is None:
            return None, None
        job = await self.session.get(ReportJob, job_id, populate_existing=True)
        if job is None or job.schedule_id is None:
            return job, None
        return job, await self.session.get(Schedule, job.schedule_id)

    async def due_deadlines(
        self, now: datetime, limit: int
    ) -> list[tuple[ScheduleRun, Schedule, ReportJob | None]]:
        """Fires whose deadline has come (an index range of the runs still holding one): each with its
        schedule and its job (one read of them all by primary key, not one a fire)."""
        stmt = (
            select(ScheduleRun, Schedule)
            .join(Schedule, Schedule.id == run.schedule_id)  # type: ignore[arg-type]
            .where(run.deadline_at.is_not(None), run.deadline_at <= now)
            .order_by(run.deadline_at)
            .limit(limit)
        )
        fires = [(fired, schedule) for fired, schedule in (await self.session.execute(stmt)).all()]
        job_ids = sorted({fired.job_id for fired, _ in fires if fired.job_id})
        found = select(ReportJob).where(jobs.id.in_(job_ids)).execution_options(populate_existing=True)
        by_id = {job.id: job for job in await self.all(found, ReportJob)} if job_ids else {}
        return [(fired, schedule, by_id.get(fired.job_id or "")) for fired, schedule in fires]

    async def clear_deadlines(self, run_ids: Sequence[int]) -> None:
        if run_ids:
            stmt = RUNS.update().where(run.id.in_(list(run_ids))).values(deadline_at=None)
            await self.session.execute(stmt)

    async def recent_run_times_s(self, job: ReportJob, limit: int) -> list[float]:
        """How long the type's last `limit` done jobs of this tenant ran (started to finished, this one left
        out): a range of the (tenant, report_type, status, id) index, newest first."""
        stmt = (
            select(jobs.started_at, jobs.finished_at)
            .where(
                jobs.tenant == job.tenant,
                jobs.report_type == job.report_type,
                jobs.status == "done",
                jobs.id < job.id,
            )
            .order_by(jobs.id.desc())
            .limit(limit)
        )
        return [
            (finished - started).total_seconds()
            for started, finished in (await self.session.execute(stmt)).all()
            if started is not None and finished is not None
        ]
