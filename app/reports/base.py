"""What a report function receives and may raise.

`ReportContext.output()` writes the report file atomically (spooled to local disk, then published to the
output store by `publish()`, which the runner awaits); `set_progress()` is flushed by the heartbeat.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from app.outputs.base import OutputStore, attempt_key, safe_filename
from app.outputs.local import AtomicFile, LocalOutputStore
from app.reports.formats import DEFAULT_FORMAT, FORMATS, RowsWriter, check_format, file_name, open_sink


class PermanentError(Exception):
    """Raised by a report when retrying cannot help; the job goes straight to `dead`."""


@dataclass
class OutputInfo:
    path: str  # the store's key: relative to OUTPUT_DIR, or to the bucket's prefix
    filename: str
    content_type: str
    size: int
    rows: int | None = None  # what the report said it wrote (`ctx.set_rows`): 0 is an empty report

    def columns(self) -> dict[str, Any]:
        """The job's output columns for this file."""
        return {
            "output_path": self.path,
            "output_filename": self.filename,
            "output_content_type": self.content_type,
            "output_size": self.size,
            "output_rows": self.rows,
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
        store: OutputStore | None = None,
        schedule_id: str | None = None,
        scheduled_for: datetime | None = None,
        requested_format: str | None = None,
    ) -> None:
        self.job_id = job_id
        self.tenant = tenant
        self.attempt = attempt
        self.replay = replay
        self.attempts_total = attempts_total
        self.output_root = output_root
        self.store = store or LocalOutputStore(output_root)
        self._spooled: tuple[Path, OutputInfo] | None = None  # written, not yet published
        # Set on a job a schedule made: compute "yesterday" from the nominal fire time (aware UTC), not now.
        self.schedule_id = schedule_id
        self.scheduled_for = scheduled_for
        self.progress: float | None = None
        self.output_info: OutputInfo | None = None
        self.rows: int | None = None
        self.step_name: str | None = None  # set while a multi-step report runs a step
        # The job's `format` param when it has one (see `rows_writer`).
        self.requested_format = requested_format
        self.step_attempt = 0

    def set_progress(self, fraction: float) -> None:
        self.progress = min(1.0, max(0.0, float(fraction)))

    def set_rows(self, rows: int) -> None:
        """Say how many rows the output holds (0: an empty report, which a destination may skip)."""
        self.rows = max(0, int(rows))
        if self.output_info is not None:
            self.output_info.rows = self.rows

    @contextmanager
    def output(self, filename: str, content_type: str, binary: bool = False) -> Iterator[IO[Any]]:
        """Open the report's output file; it appears under its name only if the block finishes (in an
        object store: once `publish()` uploaded it whole)."""
        name = safe_filename(filename)
        key = attempt_key(self.job_id, self.replay, self.attempt, name)
        atomic = AtomicFile(self.store.spool_dir / key, binary=binary)
        fh = atomic.open()
        try:
            yield fh
        except BaseException:
            atomic.abort()
            raise
        size = atomic.commit()
        info = OutputInfo(path=key, filename=name, content_type=content_type, size=size, rows=self.rows)
        if self.store.keeps_spool:
            self.output_info = info
        else:
            self.discard_spool()  # a report that writes twice keeps its last file
            self._spooled = (atomic.final_path, info)

    @asynccontextmanager
    async def rows_writer(
        self,
        columns: Sequence[str],
        fmt: str | None = None,
        filename: str = "report",
        expected_rows: int | None = None,
    ) -> AsyncIterator[RowsWriter]:
        """The report's output as rows, streamed: `async with ctx.rows_writer(["day", "total"]) as out:
        await out.write_rows(rows)`. The format is `fmt`, else the job's `format` param, else CSV; the
        file is `filename` + `.csv`/`.xlsx`, with a header row of `columns`. The rows written are the job's
        row count (`set_rows`); with `expected_rows`, progress follows them."""
        chosen = check_format(fmt or self.requested_format or DEFAULT_FORMAT)
        content_type = FORMATS[chosen][0]
        with self.output(file_name(filename, chosen), content_type, binary=chosen == "xlsx") as fh:
            writer = RowsWriter(open_sink(chosen, fh, columns), expected_rows, self.set_progress)
            yield writer
            await writer.finish()
            self.set_rows(writer.rows)

    async def publish(self) -> None:
        """Upload the spooled output (if any) to the store; only then does the job get to name it."""
        if self._spooled is None:
            return
        path, info = self._spooled
        try:
            await self.store.save(info.path, path, info.content_type, info.filename)
        finally:
            self.discard_spool()
        info.rows = self.rows if self.rows is not None else info.rows
        self.output_info = info

    def discard_spool(self) -> None:
        if self._spooled is None:
            return
        path = self._spooled[0]
        self._spooled = None
        path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # the attempt's and the job's directories, when left empty
            path.parent.rmdir()
            path.parent.parent.rmdir()

    async def run_and_publish(self, work: Awaitable[Any]) -> None:
        """The report, then its upload: both inside the attempt's time limit, heartbeat and cancellation, so
        a store outage fails the attempt (retryable) instead of losing the job."""
        try:
            await work
            await self.publish()
        finally:
            self.discard_spool()
