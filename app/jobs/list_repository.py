"""SQL of the job list: every filter read along an index whose last column is the id, so a page reads about
as many index entries as it shows, whatever the table holds (issue 28); a filter no index serves scans a
bounded stretch of ids and says where to go on.

The plan: the filters are turned into an id range (the cursor; a ULID prefix; creation times, since a ULID
starts with its creation time) and an index chosen by the most selective filter it serves. Several statuses
are one range each, merged. Whatever the chosen index does not serve is a *residual* condition: its range
reads at most `SCAN_ROWS` entries a page, and a page cut short there carries `resume_before`, the id down to
which every range was read (a short or even empty page with a cursor, as DynamoDB's or Stripe's search
pages: follow the cursor until there is none).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.sql import Select

from app.core.repository import Repository, table_of
from app.core.states import JobStatus
from app.core.tenancy import TenantScope
from app.models import ReportJob

JOBS = table_of(ReportJob)
job = JOBS.c

SCAN_ROWS = 2000  # index entries one range may read for a page when a filter is not served by its index
# A job's id is made just after its created_at (same request): its ULID time is at or after created_at, and
# before created_at + this (a bulk submit of 10,000 jobs makes their ids within a few hundred ms).
ID_LAG = timedelta(minutes=1)
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ID_CEILING = "Z" * 26  # above every id
ID_FLOOR = ""


@dataclass(frozen=True)
class JobFilter:
    scope: TenantScope
    statuses: Sequence[JobStatus] = ()
    report_type: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    ordering_key: str | None = None
    id_prefix: str | None = None  # leading characters of a (ULID) id: a range of the primary key
    schedule_id: str | None = None


@dataclass
class JobListPage:
    """Up to `limit` jobs newest first; `resume_before`: when the page was cut short by the scan bound, the
    id to continue below (the next page's cursor), else None."""

    rows: list[ReportJob] = field(default_factory=list)
    resume_before: str | None = None


@dataclass(frozen=True)
class Plan:
    """One index, the equality conditions it serves (one set per range), and the conditions left over."""

    index: str
    ranges: list[list[ColumnElement[bool]]]
    residual: list[ColumnElement[bool]]


def ulid_floor(at: datetime) -> str:
    """The smallest ULID made at `at` (its 10 leading characters are the Unix time in ms)."""
    ms = max(0, int(at.timestamp() * 1000))
    head = "".join(CROCKFORD[(ms >> (5 * (9 - i))) & 31] for i in range(10))
    return head + "0" * 16


def id_bounds(flt: JobFilter, before_id: str | None) -> tuple[str, str]:
    """[low, high): ids the filter can match."""
    low, high = ID_FLOOR, ID_CEILING
    if before_id:
        high = min(high, before_id)
    if flt.id_prefix:
        low = max(low, flt.id_prefix)
        high = min(high, flt.id_prefix + "Z" * (26 - len(flt.id_prefix)) + "~")
    if flt.created_after:
        low = max(low, ulid_floor(flt.created_after))
    if flt.created_before and flt.created_before < datetime.max.replace(tzinfo=UTC) - ID_LAG:
        high = min(high, ulid_floor(flt.created_before + ID_LAG))
    return low, high


def plan(flt: JobFilter) -> Plan:
    """The index that serves the most selective filter, and what it leaves over."""
    tenant = [job.tenant == flt.scope.tenant] if flt.scope.tenant is not None else []
    statuses = [status.value for status in flt.statuses]
    residual: list[ColumnElement[bool]] = []
    if flt.created_after:
        residual.append(job.created_at >= flt.created_after)
    if flt.created_before:
        residual.append(job.created_at < flt.created_before)
    if flt.schedule_id:
        eq = [job.schedule_id == flt.schedule_id]
        key = [job.ordering_key == flt.ordering_key] if flt.ordering_key else []
        rest = [*residual, *tenant, *key, *_type(flt), *_status(statuses)]
        return Plan("ix_report_jobs_schedule_id", [eq], rest)
    if flt.ordering_key and tenant:
        eq = [*tenant, job.ordering_key == flt.ordering_key]
        return Plan("ix_report_jobs_tenant_key_id", [eq], [*residual, *_type(flt), *_status(statuses)])
    if flt.ordering_key:
        residual.append(job.ordering_key == flt.ordering_key)
    if flt.report_type and tenant:
        eq = [*tenant, job.report_type == flt.report_type]
        each = statuses or [status.value for status in JobStatus]
        return Plan("ix_report_jobs_tenant_type_status_id", [[*eq, job.status == s] for s in each], residual)
    if flt.report_type:
        residual.append(job.report_type == flt.report_type)
    if statuses:
        index = "ix_report_jobs_tenant_status_id" if tenant else "ix_report_jobs_status_id"
        return Plan(index, [[*tenant, job.status == s] for s in statuses], residual)
    return Plan("ix_report_jobs_tenant_id" if tenant else "PRIMARY", [tenant], residual)


def _type(flt: JobFilter) -> list[ColumnElement[bool]]:
    return [job.report_type == flt.report_type] if flt.report_type else []


def _status(statuses: list[str]) -> list[ColumnElement[bool]]:
    return [job.status.in_(statuses)] if statuses else []


def _hinted(stmt: Select[tuple[str]], index: str) -> Select[tuple[str]]:
    """On MySQL the chosen index, by name (the optimizer may otherwise walk another one by id)."""
    return stmt.with_hint(JOBS, f"FORCE INDEX ({index})", dialect_name="mysql")


class JobListRepository(Repository):
    async def page(
        self, flt: JobFilter, before_id: str | None, limit: int, scan_rows: int = SCAN_ROWS
    ) -> JobListPage:
        """Up to `limit` jobs newest first below `before_id`. A range the index serves fully reads `limit`
        index entries; one with residual conditions reads at most `scan_rows` entries and their rows. Then
        the page's rows by their key."""
        low, high = id_bounds(flt, before_id)
        if low >= high:
            return JobListPage()
        chosen = plan(flt)
        found: list[str] = []
        frontier = ID_FLOOR  # every range was read down to here (one cut short by the scan bound)
        for conditions in chosen.ranges:
            ids = _hinted(
                select(job.id).where(*conditions, job.id >= low, job.id < high).order_by(job.id.desc()),
                chosen.index,
            )
            if not chosen.residual:
                found += await self.all(ids.limit(limit), str)
                continue
            stretch = ids.limit(scan_rows).subquery("stretch")
            matched = await self.all(
                select(job.id)
                .select_from(JOBS.join(stretch, stretch.c.id == job.id))
                .where(*chosen.residual)
                .order_by(job.id.desc())
                .limit(limit),
                str,
            )
            found += matched
            if len(matched) < limit:
                row = (await self.session.execute(select(func.count(), func.min(stretch.c.id)))).one()
                if row[0] == scan_rows:
                    frontier = max(frontier, row[1])
        shown = sorted((i for i in found if i >= frontier), reverse=True)[:limit]
        resume = frontier if frontier and len(shown) < limit else None
        return JobListPage(await self._rows(shown), resume)

    async def _rows(self, ids: list[str]) -> list[ReportJob]:
        if not ids:
            return []
        rows = await self.all(select(ReportJob).where(job.id.in_(ids)), ReportJob)
        return sorted(rows, key=lambda row: row.id, reverse=True)
