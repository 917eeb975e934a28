"""Tables of counts kept beside the data they count: finished jobs by minute (the console's chart) and open
dead letters by tenant (the gauges), so a read takes a row a group instead of the rows counted.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from app.core.sqltypes import UTCDateTime


class FinishedMinute(SQLModel, table=True):
    """Jobs that ended done or dead in one minute, by tenant: the console's throughput chart, rolled up
    from report_jobs once the minute is over (app/console/repository.py)."""

    __tablename__ = "finished_minutes"

    minute: datetime = Field(sa_type=UTCDateTime, primary_key=True)
    tenant: str = Field(primary_key=True, max_length=64)
    status: str = Field(primary_key=True, max_length=16)
    jobs: int = Field(nullable=False)


class OpenLetterCount(SQLModel, table=True):
    """Open dead letters (neither archived nor replayed) by tenant, kept by the transitions that open and
    close a letter (app/dead_letters/repository.py): the gauges read a row per tenant, not the letters."""

    __tablename__ = "open_letter_counts"

    tenant: str = Field(primary_key=True, max_length=64)
    letters: int = Field(default=0, nullable=False)
