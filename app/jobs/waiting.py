"""When a waiting job became free to start: the start of its queue wait.

One rule for the queue-wait histogram (here) and the oldest-eligible-job gauge (its SQL twin: the
`eligible_at` column the database computes, app/models.py; tests hold both to the same answers).
"""

from __future__ import annotations

from datetime import datetime

from app.core.states import JobStatus
from app.models import ReportJob


def eligible_since(job: ReportJob) -> datetime | None:
    """retrying: when its backoff ends; scheduled: its run_at; pending: its last change into pending (submit,
    replay, a hand-back at shutdown), or its run_at if that is later. None for a job that is not waiting."""
    if job.status == JobStatus.RETRYING:
        return job.next_attempt_at
    if job.status == JobStatus.SCHEDULED:
        return job.run_at
    if job.status == JobStatus.PENDING:
        return max(job.updated_at, job.run_at) if job.run_at else job.updated_at
    return None
