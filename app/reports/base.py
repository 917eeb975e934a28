"""What a report function receives and may raise.

`ReportContext.output()` writes the report file atomically; `set_progress()` is flushed by the heartbeat.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from app.core.storage import AtomicFile, attempt_dir, relative_to_root, safe_filename


class PermanentError(Exception):
    """Raised by a report when retrying cannot help; the job goes straight to `dead`."""


@dataclass
class OutputInfo:
    path: str  # relative to OUTPUT_DIR
    filename: str
    content_type: str
    size: int

    def columns(self) -> dict[str, Any]:
        """The job's output columns for this file."""
        return {
            "output_path": self.path,
            "output_filename": self.filename,
            "output_content_type": self.content_type,
            "output_size": self.size,
        }


class ReportContext:
    def __init__(
        self,
        *,
        job_id: str,
        tenant: str,
        attempt: int,
        replay: int,
        attempts_total: int,
        output_root: Path,
        schedule_id: str | None = None,
        scheduled_for: datetime | None = None,
    ) -> None:
        self.job_id = job_id
        self.tenant = tenant
        self.attempt = attempt
        self.replay = replay
        self.attempts_total = attempts_total
        self.output_root = output_root
        # Set on a job a schedule made: compute "yesterday" from the nominal fire time (aware UTC), not now.
        self.schedule_id = schedule_id
        self.scheduled_for = scheduled_for
        self.progress: float | None = None
        self.output_info: OutputInfo | None = None
        self.step_name: str | None = None  # set while a multi-step report runs a step
        self.step_attempt = 0

    def set_progress(self, fraction: float) -> None:
        self.progress = min(1.0, max(0.0, float(fraction)))

    @contextmanager
    def output(self, filename: str, content_type: str, binary: bool = False) -> Iterator[IO[Any]]:
        """Open the report's output file; it appears under its name only if the block finishes."""
        name = safe_filename(filename)
        final = attempt_dir(self.output_root, self.job_id, self.replay, self.attempt) / name
        atomic = AtomicFile(final, binary=binary)
        fh = atomic.open()
        try:
            yield fh
        except BaseException:
            atomic.abort()
            raise
        size = atomic.commit()
        self.output_info = OutputInfo(
            path=relative_to_root(self.output_root, final),
            filename=name,
            content_type=content_type,
            size=size,
        )
