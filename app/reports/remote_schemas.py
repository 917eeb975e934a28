"""Wire schemas of the attempt callbacks an asynchronous HTTP report's service calls: heartbeat, progress,
failure, and the answers (whether to stop, whether a result was taken).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class HeartbeatIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    progress: float | None = Field(None, ge=0, le=1, description="How far the report got, 0–1 (optional)")


class ProgressIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    progress: float = Field(ge=0, le=1, description="How far the report got, 0–1")


class FailIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: str = Field(min_length=1, max_length=2000, description="What went wrong (shown on the job)")
    retryable: bool = Field(
        False, description="`true`: the job tries again (if it has attempts left); `false`: it goes dead"
    )


class CallbackAnswer(BaseModel):
    cancel: bool = Field(description="`true`: a cancel of the job was asked; stop and call nothing more")


class ResultAccepted(BaseModel):
    accepted: bool = Field(True, description="The outcome was recorded; the job finishes shortly")
