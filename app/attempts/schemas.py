"""Wire schema of one attempt as `GET /v1/jobs/{id}/attempts` lists it.

`outcome` is one of running, succeeded, failed, timed_out, lost, cancelled, superseded.
"""

from __future__ import annotations

from pydantic import BaseModel

from app.core.states import AttemptOutcome
from app.core.wire import ErrorInfo, Stamp
from app.models import JobAttempt


class AttemptPublic(BaseModel):
    attempt: int
    started_at: Stamp
    finished_at: Stamp | None
    outcome: AttemptOutcome
    error: ErrorInfo | None
    worker: str | None

    @classmethod
    def of(cls, row: JobAttempt) -> AttemptPublic:
        return cls(
            attempt=row.attempt,
            started_at=row.started_at,
            finished_at=row.finished_at,
            outcome=row.outcome,
            error=ErrorInfo.of(row.error),
            worker=row.worker,
        )
