"""The worker registry's use cases: announce, beat, leave, list, purge; and `Presence`, the background task
that keeps one process's row fresh (what the worker, dead-letter and scheduler processes run).

A process is live while its last heartbeat is younger than WORKER_LIVE_FOR_S (1.5 beats), so one killed
with SIGKILL leaves the live list within 2 heartbeats; a clean stop deletes the row at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib import metadata

from app.core.config import get_settings
from app.core.db import is_db_outage, session_scope
from app.core.ids import new_id
from app.core.times import utcnow
from app.fleet.repository import FleetRepository
from app.fleet.schemas import ProcessKind, ProcessState
from app.models import WorkerProcess

log = logging.getLogger(__name__)

#: Rows silent for longer than this are deleted by the scheduler's tick.
PURGE_GONE_AFTER_S = 86400.0
#: A clean stop waits this long at most to delete its row (the database may be down).
LEAVE_TIMEOUT_S = 5.0
UNKNOWN_VERSION = "0+unknown"


def package_version() -> str:
    try:
        return metadata.version("report-orchestrator")
    except metadata.PackageNotFoundError:
        return UNKNOWN_VERSION


@dataclass(frozen=True)
class Announcement:
    """What a process said about itself when it announced: kept so a purged row can be put back as it was."""

    kind: ProcessKind
    host: str
    pid: int
    version: str
    started_at: datetime
    concurrency: int
    metrics_port: int | None

    def row(self, process_id: str, now: datetime, jobs_running: int, ticked: bool) -> WorkerProcess:
        return WorkerProcess(
            id=process_id,
            name=f"{self.host}:{self.pid}"[:200],
            kind=self.kind,
            host=self.host[:255],
            pid=self.pid,
            version=self.version[:50],
            started_at=self.started_at,
            concurrency=self.concurrency,
            jobs_running=jobs_running,
            last_heartbeat_at=now,
            last_tick_at=now if ticked else None,
            metrics_port=self.metrics_port,
        )


# This process's announcements by row id (one per process in practice; tests announce several).
_announced: dict[str, Announcement] = {}


@dataclass(frozen=True)
class ListedProcess:
    row: WorkerProcess
    state: ProcessState


async def announce(kind: ProcessKind, concurrency: int, metrics_port: int | None) -> str:
    """Insert this process's row (`<host>:<pid>`, version, start time); returns its id for `beat`/`leave`."""
    now = utcnow()
    announcement = Announcement(
        kind=kind,
        host=socket.gethostname(),
        pid=os.getpid(),
        version=package_version(),
        started_at=now,
        concurrency=concurrency,
        metrics_port=metrics_port or None,
    )
    process_id = new_id()
    async with session_scope() as session:
        await FleetRepository(session).add_process(announcement.row(process_id, now, 0, ticked=False))
    _announced[process_id] = announcement
    return process_id


async def beat(process_id: str, jobs_running: int, ticked: bool = False) -> None:
    """Record a heartbeat (with a scheduler tick when `ticked`). A row deleted meanwhile (purged while the
    process was cut off from the database) is inserted again: a process that outlived a purge re-appears."""
    now = utcnow()
    async with session_scope() as session:
        repo = FleetRepository(session)
        if await repo.touch(process_id, now, jobs_running, ticked):
            return
        announcement = _announced.get(process_id)
        if announcement is None:
            log.warning("heartbeat for a process this one never announced", extra={"process_id": process_id})
            return
        await repo.add_process(announcement.row(process_id, now, jobs_running, ticked))
    log.info("registry row was gone; announced again", extra={"process_id": process_id})


async def leave(process_id: str) -> None:
    """Delete the row (a clean stop): the process leaves the list at once."""
    async with session_scope() as session:
        await FleetRepository(session).remove(process_id)
    _announced.pop(process_id, None)


def live_since(now: datetime) -> datetime:
    """Heartbeats at or after this instant are live."""
    return now - timedelta(seconds=get_settings().worker_live_for_s)


async def list_processes(include_gone: bool) -> list[ListedProcess]:
    """Live processes (or every row when `include_gone`), each with its state, by kind then start time."""
    since = live_since(utcnow())
    async with session_scope() as session:
        rows = await FleetRepository(session).list_processes(None if include_gone else since)
    return [ListedProcess(row, "live" if row.last_heartbeat_at >= since else "gone") for row in rows]


async def purge_gone(older_than_s: float = PURGE_GONE_AFTER_S) -> int:
    """Delete rows whose last heartbeat is older than `older_than_s`; returns how many."""
    async with session_scope() as session:
        return await FleetRepository(session).purge_silent(utcnow() - timedelta(seconds=older_than_s))


async def live_counts() -> dict[str, int]:
    """Live processes by kind, every kind present (0 when none)."""
    async with session_scope() as session:
        counts = await FleetRepository(session).live_counts(live_since(utcnow()))
    return {kind: counts.get(kind, 0) for kind in ("worker", "dead_letter", "scheduler")}


async def last_tick_at() -> datetime | None:
    async with session_scope() as session:
        return await FleetRepository(session).last_tick_at()


class Presence:
    """This process's row, kept fresh: announced and then beaten every WORKER_HEARTBEAT_S by a background
    task, with the number of running jobs. A database outage is logged and ridden out (the process goes on
    and re-appears when the database is back); `stop` deletes the row and stops all further writes.
    """

    def __init__(
        self,
        kind: ProcessKind,
        concurrency: int,
        metrics_port: int | None = None,
        jobs_running: Callable[[], int] = lambda: 0,
    ) -> None:
        self.kind: ProcessKind = kind
        self.concurrency = concurrency
        self.metrics_port = metrics_port
        self.jobs_running = jobs_running
        self.process_id: str | None = None
        self._lock = asyncio.Lock()  # the loop's beat and a tick's beat never race (one re-insert at most)
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._failing = False

    @property
    def beating(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start beating (once; from inside the running event loop)."""
        if self._task is None and not self._stopped:
            self._task = asyncio.create_task(self._run(), name=f"presence-{self.kind}")

    async def _run(self) -> None:
        interval_s = get_settings().worker_heartbeat_s
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            await self.beat()
            # A fixed cadence, not "interval after the last beat": the live window is 1.5 beats wide.
            next_at = max(next_at + interval_s, loop.time())
            await asyncio.sleep(next_at - loop.time())

    async def beat(self, ticked: bool = False) -> None:
        """Announce (the first time) or beat now; never raises: a failure is logged, the next beat retries."""
        async with self._lock:
            if self._stopped:
                return
            try:
                if self.process_id is None:
                    self.process_id = await announce(self.kind, self.concurrency, self.metrics_port)
                    log.info("announced in the worker registry", extra={"process_id": self.process_id})
                    if ticked:
                        await beat(self.process_id, self.jobs_running(), ticked=True)
                else:
                    await beat(self.process_id, self.jobs_running(), ticked=ticked)
            except Exception as exc:
                self._report_failure(exc)
            else:
                if self._failing:
                    log.info("worker registry heartbeat recovered")
                self._failing = False

    def _report_failure(self, exc: Exception) -> None:
        # Once per outage at WARNING, so a long one does not flood the log.
        level = logging.DEBUG if self._failing else logging.WARNING
        what = "database unavailable" if is_db_outage(exc) else "unexpected error"
        log.log(
            level,
            f"worker registry heartbeat failed ({what}); will keep trying",
            extra={"error": repr(exc)},
            exc_info=not is_db_outage(exc),
        )
        self._failing = True

    async def stop(self) -> None:
        """Stop beating and delete the row (a clean shutdown); nothing is written after this."""
        self._stopped = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        try:
            await asyncio.wait_for(self._leave(), LEAVE_TIMEOUT_S)
        except Exception as exc:
            log.warning("could not remove this process from the worker registry", extra={"error": repr(exc)})

    async def _leave(self) -> None:
        # Under the lock: a tick's beat still in flight ends first, so it cannot re-insert the deleted row.
        async with self._lock:
            if self.process_id is not None:
                await leave(self.process_id)
