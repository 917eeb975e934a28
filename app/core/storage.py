"""Output files: one key per job attempt (`{job_id}/r{replay}-a{attempt}/{name}`), written atomically, read
by job id only; kept in OUTPUT_DIR (`OUTPUT_STORAGE=local`) or an S3-compatible bucket (core/object_store).

No user-supplied string ever becomes a path or a key: both come from ids we generated and sanitised names.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from app.core.config import Settings, get_settings
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


def attempt_dir(output_dir: Path, job_id: str, replay: int, attempt: int) -> Path:
    return Path(output_dir) / job_id / f"r{replay}-a{attempt}"


def relative_to_root(output_dir: Path, path: Path) -> str:
    return str(Path(path).resolve().relative_to(Path(output_dir).resolve()))


def resolve_output(output_dir: Path, relative_path: str) -> Path | None:
    """The absolute path of a stored output, or None if it escapes OUTPUT_DIR or is gone."""
    root = Path(output_dir).resolve()
    path = (root / relative_path).resolve()
    if root not in path.parents or not path.is_file():
        return None
    return path


def content_disposition(filename: str) -> str:
    """The header FileResponse sends for our (ASCII, sanitised) names, stored with an object for links."""
    return f'attachment; filename="{filename}"'


class AtomicFile:
    """Write to a temporary name in the target directory, fsync, then rename into place on success."""

    def __init__(self, final_path: Path, binary: bool = False) -> None:
        self.final_path = final_path
        self.tmp_path = final_path.with_name(f".{final_path.name}.{uuid.uuid4().hex}.tmp")
        self._binary = binary
        self._fh: IO[Any] | None = None

    def open(self) -> IO[Any]:
        self.final_path.parent.mkdir(parents=True, exist_ok=True)
        if self._binary:
            self._fh = open(self.tmp_path, "wb")  # noqa: SIM115
        else:
            self._fh = open(self.tmp_path, "w", encoding="utf-8", newline="")  # noqa: SIM115
        return self._fh

    def commit(self) -> int:
        assert self._fh is not None
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        os.replace(self.tmp_path, self.final_path)
        return self.final_path.stat().st_size

    def abort(self) -> None:
        if self._fh is not None:
            self._fh.close()
        self.tmp_path.unlink(missing_ok=True)


def delete_job_outputs(output_dir: Path, job_id: str) -> None:
    shutil.rmtree(Path(output_dir) / job_id, ignore_errors=True)


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

    @abstractmethod
    async def delete_job(self, job_id: str) -> None:
        """Delete every file of a job, every attempt's; raises OutputStoreUnavailable on an outage."""


class LocalOutputStore(OutputStore):
    """OUTPUT_DIR itself: the spooled file is renamed into place by AtomicFile, the API serves it by path."""

    @property
    def keeps_spool(self) -> bool:
        return True

    async def save(self, key: str, spooled: Path, content_type: str, filename: str) -> None:
        return None

    async def fetch(self, key: str) -> StoredOutput | None:
        path = resolve_output(self.spool_dir, key)
        return StoredOutput(size=path.stat().st_size, path=path) if path is not None else None

    async def delete_job(self, job_id: str) -> None:
        await asyncio.to_thread(delete_job_outputs, self.spool_dir, job_id)


@lru_cache(maxsize=4)
def _store_for(storage: str, spool_dir: Path, options: tuple[tuple[str, Any], ...]) -> OutputStore:
    if storage == "local":
        return LocalOutputStore(spool_dir)
    from app.core.object_store import S3OutputStore  # only S3 deployments load the client

    return S3OutputStore(storage, spool_dir, dict(options))


_last: tuple[Settings, OutputStore] | None = None  # the store of the settings object asked for last


def get_output_store() -> OutputStore:
    """The store OUTPUT_STORAGE names (one per distinct configuration, so tests may switch it); looked up
    once per settings object (every job asks)."""
    global _last
    settings = get_settings()
    if _last is None or _last[0] is not settings:
        options = settings.object_store_options
        _last = (settings, _store_for(settings.output_storage, Path(settings.output_dir), options))
    return _last[1]
