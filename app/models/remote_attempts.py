"""The attempts run by a service outside our processes (asynchronous HTTP report types): what that service
reported through its attempt token, read by the worker holding the attempt.

One row per (job, replay, attempt): written by the worker as it hands the attempt over, then by the API's
attempt-callback routes (contact, progress, and once the outcome), compare-and-set on `outcome IS NULL`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from app.core.sqltypes import UTCDateTime


class RemoteAttempt(SQLModel, table=True):
    __tablename__ = "remote_attempts"

    job_id: str = Field(max_length=26, primary_key=True, foreign_key="report_jobs.id", ondelete="CASCADE")
    replay: int = Field(primary_key=True)
    attempt: int = Field(primary_key=True)
    tenant: str = Field(max_length=64, nullable=False)
    nonce: str = Field(max_length=26, nullable=False)  # the run's: its token carries it
    created_at: datetime = Field(sa_type=UTCDateTime, nullable=False)
    seen_at: datetime = Field(sa_type=UTCDateTime, nullable=False)  # the service's last word (or handover)
    progress: float | None = Field(default=None)
    outcome: str | None = Field(default=None, max_length=16)  # succeeded | failed, once
    error: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    output_path: str | None = Field(default=None, max_length=500)
    output_filename: str | None = Field(default=None, max_length=255)
    output_content_type: str | None = Field(default=None, max_length=100)
    output_size: int | None = Field(default=None, sa_type=sa.BigInteger)
    output_rows: int | None = Field(default=None, sa_type=sa.BigInteger)
