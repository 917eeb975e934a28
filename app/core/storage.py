"""Output files: one directory per job attempt under OUTPUT_DIR, written atomically, read by job id only.

No user-supplied string ever becomes a path: directories come from ids we generated, file names are sanitised.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path
from typing import IO, Any

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


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


def delete_job_outputs(output_dir: Path, job_id: str) -> None:
    shutil.rmtree(Path(output_dir) / job_id, ignore_errors=True)
