"""Wire schemas of the worker registry: one process as `GET /v1/workers` lists it, and the list.

`state` is computed when listed: `live` while the last heartbeat is younger than 1.5 × WORKER_HEARTBEAT_S.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from app.core.wire import Stamp
from app.models import WorkerProcess

ProcessKind = Literal["worker", "dead_letter", "scheduler"]
ProcessState = Literal["live", "gone"]
StateFilter = Literal["live", "all"]


class WorkerPublic(BaseModel):
    id: str
    name: str = Field(description="`<host>:<pid>`, as in a job attempt's `worker`")
    kind: ProcessKind
    host: str
    pid: int
    version: str
    started_at: Stamp
    concurrency: int = Field(description="Jobs it runs at once (0 for the scheduler)")
    jobs_running: int = Field(description="Jobs running at its last heartbeat")
    last_heartbeat_at: Stamp
    last_tick_at: Stamp | None = Field(description="The scheduler's last tick (null for other kinds)")
    metrics_port: int | None = Field(description="Where it serves Prometheus metrics (null: not served)")
    state: ProcessState

    @classmethod
    def of(cls, row: WorkerProcess, state: ProcessState) -> WorkerPublic:
        return cls(
            id=row.id,
            name=row.name,
            kind=row.kind,  # validated: a str column, and only our kinds are ever written
            host=row.host,
            pid=row.pid,
            version=row.version,
            started_at=row.started_at,
            concurrency=row.concurrency,
            jobs_running=row.jobs_running,
            last_heartbeat_at=row.last_heartbeat_at,
            last_tick_at=row.last_tick_at,
            metrics_port=row.metrics_port,
            state=state,
        )


class WorkerList(BaseModel):
    items: list[WorkerPublic]
