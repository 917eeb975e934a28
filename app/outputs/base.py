"""What every output store is: the interface (save, fetch, delete a batch of jobs' files), what a download
hands over, the outage error, and the names: one key per job attempt (`{job_id}/r{replay}-a{attempt}/{name}`).

No user-supplied string ever becomes a path or a key: both come from ids we generated and sanitised names.
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.core.errors import Unavailable

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class OutputStoreUnavailable(Unavailable):
    """The object store did not answer: a retryable attempt failure in a worker, a 503 in the API."""


def safe_filename(name: str, default: str = "report.bin") -> str:
    base = os.path.basename(name.replace("\\", "/"))
    stem, dot, ext = base.rpartition(".")
    if not dot or not stem:
        stem, ext = base, ""
    clean_stem = _UNSAFE.sub("_", stem).strip("._")[:180]
    clean_ext = _UNSAFE.sub("", ext)[:15]
    if not clean_stem:
        return f"report.{clean_ext}" if clean_ext and stem else default
    return f"{clean_stem}.{clean_ext}" if clean_ext else clean_stem


def attempt_key(job_id: str, replay: int, attempt: int, filename: str) -> str:
    """An attempt's own key: a stale attempt can never overwrite a newer one's file; the job row names the
    winner."""
    return f"{job_id}/r{replay}-a{attempt}/{filename}"


def replay_of_key(key: str) -> int | None:
    """The replay an attempt key (or an attempt's folder, `r{replay}-a{attempt}`) was written by."""
    folder = key.split("/")[1] if "/" in key else key
    head = folder.split("-", 1)[0]
    return int(head[1:]) if head[:1] == "r" and head[1:].isdigit() else None


def written_up_to(key: str, replays: Mapping[str, int] | None) -> bool:
    """Whether a key is one of the generations to delete: every one without `replays`, else those of a
    replay at most the one read for its job (a replay's later files are not for retention to delete)."""
    if replays is None:
        return True
    replay = replay_of_key(key)
    last = replays.get(key.split("/", 1)[0])
    return replay is not None and last is not None and replay <= last


def content_disposition(filename: str) -> str:
    """The header FileResponse sends for our (ASCII, sanitised) names, stored with an object for links."""
    return f'attachment; filename="{filename}"'


@dataclass(frozen=True)
class StoredOutput:
    """How the API hands a stored file over: a local path, a stream of the object's bytes, or a link."""

    size: int
    path: Path | None = None
    chunks: AsyncIterator[bytes] | None = None
    link: str | None = None


class OutputStore(ABC):
    """Where finished report files live. A report writes into `spool_dir` (local disk of its own process);
    `save` publishes the finished file under its key, whole or not at all."""

    def __init__(self, spool_dir: Path) -> None:
        self.spool_dir = Path(spool_dir)

    @property
    def keeps_spool(self) -> bool:
        """True when the spooled file already is the stored one (local storage: nothing to upload)."""
        return False

    @abstractmethod
    async def save(self, key: str, spooled: Path, content_type: str, filename: str) -> None:
        """Publish a finished local file under `key` (then the spooled copy may go)."""

    @abstractmethod
    async def fetch(self, key: str) -> StoredOutput | None:
        """The stored file for a download, or None if it is gone."""

    async def delete_job(self, job_id: str) -> None:
        """Delete every file of a job, every attempt's; raises OutputStoreUnavailable on an outage."""
        await self.delete_jobs([job_id])

    @abstractmethod
    async def delete_jobs(self, job_ids: Sequence[str], replays: Mapping[str, int] | None = None) -> None:
        """Delete every file of these jobs, every attempt's, in a few calls whatever their number (retention
        hands thousands at a time); with `replays`, only the files of each job's replays up to the one given
        (a job replayed while retention read it keeps its new run's files). Raises OutputStoreUnavailable
        on an outage, after which any of them may still have files: the caller keeps them all, and a later
        call finishes (deleting is idempotent)."""
