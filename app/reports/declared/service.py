"""REPORT_TYPES_FILE in a running process: loaded at start, re-read when its mtime or size changes (polled
every REPORT_TYPES_POLL_S) and on SIGHUP; a broken file is logged and shown, the previous good set stays.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from app.core import metrics
from app.core.config import get_settings
from app.reports.declared import loader
from app.reports.declared.errors import DeclarationError
from app.reports.registry import ReportType, registry

log = logging.getLogger(__name__)

UNREAD = ("", -1, -1)


@dataclass
class Status:
    """What `GET /v1/report-types/declarations` shows: the file, the types in force, the last error."""

    file: str | None = None
    types: list[str] = field(default_factory=list)
    loaded_at: datetime | None = None  # the last load that succeeded (the types in force came from it)
    checked_at: datetime | None = None  # the last load tried
    error: DeclarationError | None = None  # why the last load failed (None: it succeeded)


class Declarations:
    """This process's view of REPORT_TYPES_FILE (one per process: `declarations`)."""

    def __init__(self) -> None:
        self.status = Status()
        # (path, mtime_ns, size) last read; None: the file was missing; UNREAD: not looked at yet
        self._signature: tuple[str, int, int] | None = UNREAD
        self._lock = threading.Lock()  # one load at a time (the start's, a poll's, a SIGHUP's)
        self._hup = asyncio.Event()

    @staticmethod
    def path() -> Path | None:
        return get_settings().report_types_file

    def _stat(self, path: Path) -> tuple[str, int, int] | None:
        try:
            st = path.stat()
        except OSError:
            return None
        return (str(path), st.st_mtime_ns, st.st_size)

    def _apply(self, path: Path, types: list[ReportType] | None, error: DeclarationError | None) -> bool:
        now = datetime.now(UTC)
        self.status.file, self.status.checked_at = str(path), now
        if error is None and types is not None:
            try:
                registry.replace_declared(types)
            except ValueError as exc:  # a Python type took a name meanwhile
                error = DeclarationError("name", str(exc)).located(str(path), None)
        if error is not None:
            self.status.error = error
            metrics.count_declarations_load("error")
            log.error(
                "report-types file refused; the types loaded before stay",
                extra={
                    "file": str(path),
                    "line": error.line,
                    "reason": str(error),
                    "kept": self.status.types,
                },
            )
            return False
        assert types is not None
        self.status.types = sorted(t.name for t in types)
        self.status.loaded_at, self.status.error = now, None
        metrics.count_declarations_load("ok")
        log.info("report types declared", extra={"file": str(path), "types": self.status.types})
        return True

    async def _reload(self, force: bool) -> bool | None:
        """Load the file if it changed (or `force`): True when its types are in force, False when it was
        refused (the previous set stays), None when there was nothing to do. Only `load_now` calls it."""
        path = self.path()
        if path is None:
            if self.status.file is not None:  # the setting went away (tests): no declared types
                registry.replace_declared([])
                self.status, self._signature = Status(), UNREAD
            return None
        signature = self._stat(path)
        if not force and signature == self._signature:
            return None  # unchanged (or still missing: its error was logged once)
        self._signature = signature
        try:
            types = await loader.load(path)
        except DeclarationError as exc:
            return self._apply(path, None, exc.located(exc.file or str(path), exc.line))
        return self._apply(path, types, None)

    def load_now(self, force: bool = False) -> bool | None:
        """Load the file if it changed (or `force`), on an event loop of its own in a thread, so that it
        works from synchronous code and inside a running loop alike (a process's start waits for it; the
        watcher runs it in a thread); one load at a time. See `_reload` for the answer."""
        if self.path() is None and self.status.file is None:
            return None
        result: list[bool | None] = [None]
        failure: list[BaseException] = []

        def run() -> None:
            try:
                result[0] = asyncio.run(self._reload(force))
            except BaseException as exc:
                failure.append(exc)

        with self._lock:
            thread = threading.Thread(target=run, name="report-types-load", daemon=True)
            thread.start()
            thread.join()
        if failure:
            raise failure[0]
        return result[0]

    def forget(self) -> None:
        """No declared types and nothing read (tests switch files between cases)."""
        with self._lock:
            registry.replace_declared([])
            self.status, self._signature = Status(), UNREAD

    def hang_up(self) -> None:
        """SIGHUP: read the file now, changed or not."""
        self._hup.set()

    async def watch(self, stop: asyncio.Event) -> None:
        """Until `stop`: reload on a change seen by the poll or on SIGHUP. Never raises (a failing load is
        logged; the next change or signal tries again)."""
        self._hup = asyncio.Event()
        while not stop.is_set():
            poll_s = get_settings().report_types_poll_s
            waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._hup.wait())]
            try:
                await asyncio.wait(waits, timeout=poll_s or None, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()
            if stop.is_set():
                return
            forced = self._hup.is_set()
            self._hup.clear()
            try:
                await asyncio.to_thread(self.load_now, forced)
            except Exception:
                log.exception("report-types reload failed; trying again at the next change")


declarations = Declarations()


@dataclass
class Watch:
    """A running watcher: `await watch.stop()` ends it and its SIGHUP handler."""

    task: asyncio.Task[None] | None
    stop_event: asyncio.Event
    sighup: bool

    async def stop(self) -> None:
        self.stop_event.set()
        if self.sighup:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


def start_watching(sighup: bool = True) -> Watch:
    """In a process's loop: watch REPORT_TYPES_FILE and, with `sighup`, reload on SIGHUP (main thread
    only). Without a file set, nothing runs."""
    stop = asyncio.Event()
    if get_settings().report_types_file is None:
        return Watch(None, stop, False)
    installed = False
    if sighup and threading.current_thread() is threading.main_thread() and os.name == "posix":
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, declarations.hang_up)
            installed = True
    task = asyncio.create_task(declarations.watch(stop), name="report-types-watch")
    return Watch(task, stop, installed)
