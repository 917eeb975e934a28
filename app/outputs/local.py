"""Outputs on local disk (`OUTPUT_STORAGE=local`): files in OUTPUT_DIR, written atomically (a temporary
name, fsync, rename), served by path; also the spool every store's reports write into first.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from app.outputs.base import OutputStore, OutputStoreUnavailable, StoredOutput, written_up_to


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


def remove_tree(path: str) -> None:
    """Delete a directory and what it holds (nothing there is fine). Plain scandir, unlink and rmdir: cheaper
    than shutil.rmtree's fd-relative walk (an open and a stat more per directory) on a job's two levels."""
    try:
        with os.scandir(path) as it:
            entries = list(it)
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            remove_tree(entry.path)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(path)


def delete_outputs_of(
    output_dir: Path, job_ids: Sequence[str], replays: Mapping[str, int] | None = None
) -> None:
    """Every job's directory, one after the other (retention deletes its batches side by side), or with
    `replays` its attempts' folders up to that replay (the job's folder too once empty); a file that cannot
    go is an outage: the caller keeps the jobs' rows and tries again later."""
    root = str(output_dir)
    for job_id in job_ids:
        folder = os.path.join(root, job_id)
        try:
            if replays is None:
                remove_tree(folder)
                continue
            attempts: list[str] = []
            with contextlib.suppress(FileNotFoundError), os.scandir(folder) as it:
                attempts = [entry.name for entry in it]
            for name in attempts:
                if written_up_to(f"{job_id}/{name}", replays):
                    remove_tree(os.path.join(folder, name))
            with contextlib.suppress(FileNotFoundError, OSError):
                os.rmdir(folder)  # not empty: a later replay's files stay, and so does its folder
        except OSError as exc:
            raise OutputStoreUnavailable(f"output directory of {job_id}: {exc}") from exc


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

    async def delete_jobs(self, job_ids: Sequence[str], replays: Mapping[str, int] | None = None) -> None:
        await asyncio.to_thread(delete_outputs_of, self.spool_dir, list(job_ids), replays)
