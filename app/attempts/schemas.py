"""Wire schema of one attempt as `GET /v1/jobs/{id}/attempts` lists it: `outcome` (running, succeeded, failed,
timed_out, lost, cancelled, superseded), and a cancel asked during it that the run may have finished before.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.core.states import AttemptOutcome
from app.core.wire import ErrorInfo, Stamp
from app.models import JobAttempt

# Outcomes of a run that ended by itself (the report's own result or its time limit), not by a stop.
ENDED_ON_ITS_OWN = frozenset({AttemptOutcome.SUCCEEDED, AttemptOutcome.FAILED, AttemptOutcome.TIMED_OUT})


class AttemptPublic(BaseModel):
    attempt: int
    started_at: Stamp
    finished_at: Stamp | None
    outcome: AttemptOutcome
    error: ErrorInfo | None
    worker: str | None
    cancel_requested_at: Stamp | None = Field(
        description="When a cancel of the job was asked while this attempt ran; null if none was"
    )
    finished_before_cancel: bool = Field(
        description="A cancel was asked during this attempt but the report ended on its own first "
        "(outcome succeeded, failed or timed_out) before its worker noticed the request at a heartbeat"
    )

    @classmethod
    def of(cls, row: JobAttempt) -> AttemptPublic:
        return cls(
            attempt=row.attempt,
            started_at=row.started_at,
            finished_at=row.finished_at,
            outcome=row.outcome,
            error=ErrorInfo.of(row.error),
            worker=row.worker,
            cancel_requested_at=row.cancel_requested_at,
            finished_before_cancel=row.cancel_requested_at is not None and row.outcome in ENDED_ON_ITS_OWN,
        )
