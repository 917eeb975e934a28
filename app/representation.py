"""The job's public JSON document, built in one place for API answers and completion-callback bodies.

Field names are part of the contract; timestamps are RFC 3339 UTC with microseconds.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.models import ReportJob
from app.states import JobStatus


def stamp(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def job_document(job: ReportJob) -> dict[str, Any]:
    output = None
    if job.status == JobStatus.DONE and job.output_filename:
        output = {
            "url": f"/v1/jobs/{job.id}/output",
            "filename": job.output_filename,
            "content_type": job.output_content_type or "application/octet-stream",
            "size": job.output_size or 0,
        }
    callback = None
    if job.callback_url:
        callback = {
            "status": job.callback_status,
            "attempts": job.callback_attempts,
            "last_error": job.callback_last_error,
        }
    return {
        "id": job.id,
        "report_type": job.report_type,
        "params": job.params,
        "status": job.status.value,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "next_attempt_at": stamp(job.next_attempt_at),
        "run_at": stamp(job.run_at),
        "ordering_key": job.ordering_key,
        "on_predecessor_dead": job.on_predecessor_dead,
        "blocked_by": job.blocked_by if job.status == JobStatus.PENDING else None,
        "progress": job.progress,
        "last_error": job.last_error,
        "output": output,
        "replay_count": job.replay_count,
        "callback_url": job.callback_url,
        "callback": callback,
        "created_at": stamp(job.created_at),
        "started_at": stamp(job.started_at),
        "finished_at": stamp(job.finished_at),
        "updated_at": stamp(job.updated_at),
    }
