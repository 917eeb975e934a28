"""What the console's pages show, gathered from the domains' services and the console's own reads; every
read is limited to the viewer's tenants. Actions go through the same services as the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from app.auth.service import Principal, authenticate, principal_by_id
from app.console.repository import AlertRow, ConsoleRepository, RunningJob, SinkHealth
from app.core.db import session_scope
from app.core.tenancy import TenantScope
from app.core.times import utcnow
from app.fleet.service import ListedProcess, list_processes
from app.observability.service import snapshot

THROUGHPUT_MINUTES = 60
RUNNING_SHOWN = 50


@dataclass(frozen=True)
class Overview:
    taken_at: datetime
    state_ok: bool
    by_status: dict[str, int]
    by_type: dict[str, dict[str, int]]  # report_type → live status → count
    running: list[RunningJob]
    throughput: list[tuple[str, int, int]]  # (minute "HH:MM", done, dead), oldest first
    oldest_eligible_age_s: float
    open_letters: int
    workers_live: dict[str, int]
    scheduler_tick_age_s: float
    sinks: list[SinkHealth] = field(default_factory=list)


async def sign_in(raw_key: str) -> Principal | None:
    return await authenticate(raw_key.strip()) if raw_key.strip() else None


async def principal_of(key_id: str) -> Principal | None:
    return await principal_by_id(key_id)


async def overview(scope: TenantScope) -> Overview:
    now = utcnow()
    snap = await snapshot()
    live = [row for row in snap.live_jobs if scope.tenant is None or row.tenant == scope.tenant]
    since = (now - timedelta(minutes=THROUGHPUT_MINUTES - 1)).replace(second=0, microsecond=0)
    async with session_scope() as session:
        repo = ConsoleRepository(session)
        finished = await repo.finished_per_minute(scope, since)
        running = await repo.running_jobs(scope, RUNNING_SHOWN)
        letters = await repo.open_letters(scope)
        sinks = await repo.sink_health()
    by_status: dict[str, int] = {}
    by_type: dict[str, dict[str, int]] = {}
    for row in live:
        by_status[row.status] = by_status.get(row.status, 0) + row.count
        counts = by_type.setdefault(row.report_type, {})
        counts[row.status] = counts.get(row.status, 0) + row.count
    per_minute: dict[str, list[int]] = {}
    for label, status, n in finished:
        slot = per_minute.setdefault(label, [0, 0])
        slot[0 if status == "done" else 1] += n
        by_status[f"{status} (1 h)"] = by_status.get(f"{status} (1 h)", 0) + n
    throughput = []
    for i in range(THROUGHPUT_MINUTES):
        at = since + timedelta(minutes=i)
        done, dead = per_minute.get(at.strftime("%Y-%m-%d %H:%M"), [0, 0])
        throughput.append((at.strftime("%H:%M"), done, dead))
    oldest = [r.oldest_eligible_since for r in live if r.oldest_eligible_since is not None]
    return Overview(
        taken_at=now,
        state_ok=snap.ok,
        by_status=by_status,
        by_type=by_type,
        running=running,
        throughput=throughput,
        oldest_eligible_age_s=max(0.0, (now - min(oldest)).total_seconds()) if oldest else 0.0,
        open_letters=letters,
        workers_live=snap.workers_live,
        scheduler_tick_age_s=snap.scheduler_tick_age_s,
        sinks=sinks,
    )


async def workers(scope: TenantScope) -> tuple[list[ListedProcess], dict[str, list[RunningJob]]]:
    """Live processes, and the running jobs (of the viewer's tenants) by the worker name they run on."""
    processes = await list_processes(include_gone=False)
    async with session_scope() as session:
        running = await ConsoleRepository(session).running_jobs(scope, 1000)
    by_worker: dict[str, list[RunningJob]] = {}
    for job in running:
        by_worker.setdefault(job.worker or "?", []).append(job)
    return processes, by_worker


async def alerts(scope: TenantScope, limit: int = 100) -> tuple[list[SinkHealth], list[AlertRow]]:
    async with session_scope() as session:
        repo = ConsoleRepository(session)
        return await repo.sink_health(), await repo.recent_alerts(scope, limit)
