"""SQL of the worker registry: add a process's row, refresh its heartbeat, remove it, list the rows, purge
the long-silent ones, and the two figures the metrics gauges read (live processes by kind, last tick).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, func, insert, select, update

from app.core.repository import Repository, insert_values, table_of
from app.models import WorkerProcess

PROCESSES = table_of(WorkerProcess)
process = PROCESSES.c


class FleetRepository(Repository):
    async def add_process(self, row: WorkerProcess) -> None:
        await self.session.execute(insert(PROCESSES).values(**insert_values(PROCESSES, row)))

    async def touch(self, process_id: str, now: datetime, jobs_running: int, ticked: bool) -> int:
        """Record a heartbeat (and a scheduler tick); 0 when the row is gone (purged, or never committed)."""
        values: dict[str, object] = {"last_heartbeat_at": now, "jobs_running": jobs_running}
        if ticked:
            values["last_tick_at"] = now
        return await self.rowcount(update(PROCESSES).where(process.id == process_id).values(**values))

    async def remove(self, process_id: str) -> int:
        return await self.rowcount(delete(PROCESSES).where(process.id == process_id))

    async def list_processes(self, beat_since: datetime | None) -> list[WorkerProcess]:
        """Every row, or only those that beat at or after `beat_since`; by kind, then oldest first."""
        stmt = select(WorkerProcess)
        if beat_since is not None:
            stmt = stmt.where(process.last_heartbeat_at >= beat_since)
        return await self.all(stmt.order_by(process.kind, process.started_at, process.id), WorkerProcess)

    async def purge_silent(self, beat_before: datetime) -> int:
        return await self.rowcount(delete(PROCESSES).where(process.last_heartbeat_at < beat_before))

    async def live_counts(self, since: datetime) -> dict[str, int]:
        """Processes of each kind that beat at or after `since` (kinds with none are absent)."""
        stmt = (
            select(process.kind, func.count())
            .where(process.last_heartbeat_at >= since)
            .group_by(process.kind)
        )
        return {kind: int(count) for kind, count in (await self.session.execute(stmt)).all()}

    async def last_tick_at(self) -> datetime | None:
        """The latest tick any scheduler recorded, live or not."""
        stmt = select(func.max(process.last_tick_at)).where(process.kind == "scheduler")
        return await self.first(stmt, datetime)
