"""Child processes of the benchmark: each in its own session, dying with us, stopped by PID.

Also reads CPU time and RSS of processes, process groups and the machine (psutil when installed, else /proc).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from workers.dev import die_with_parent

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


class Proc:
    """One child process; output goes to a log file; stop() is SIGTERM by PID, then SIGKILL of its group."""

    def __init__(self, name: str, popen: subprocess.Popen[bytes], log_path: Path, log: IO[bytes]) -> None:
        self.name = name
        self.popen = popen
        self.log_path = log_path
        self._log = log

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout_s: float = 15.0) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                # The group is this child's own (start_new_session): prefork pool children go with it.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, 0)  # leftover children of a group whose leader exited
            os.killpg(self.popen.pid, signal.SIGKILL)
        self._log.close()
        PROCS.discard(self)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


PROCS: set[Proc] = set()


def spawn(name: str, argv: Sequence[str], env: dict[str, str], cwd: Path, log_dir: Path) -> Proc:
    log_path = log_dir / f"{name}.log"
    log = log_path.open("ab")
    popen = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # Ctrl-C reaches only us; we stop the children ourselves
        preexec_fn=die_with_parent(os.getpid()),
        close_fds=True,
    )
    proc = Proc(name, popen, log_path, log)
    PROCS.add(proc)
    return proc


def stop_all() -> None:
    for proc in list(PROCS):
        with contextlib.suppress(Exception):
            proc.stop(timeout_s=10.0)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process, all its threads (nanosecond schedstat when available)."""
    try:
        total_ns = 0
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError):
                total_ns += int((task / "schedstat").read_text().split()[0])
        return total_ns / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        times = psutil.Process(pid).cpu_times()
        return float(times.user + times.system)
    except ImportError:
        pass
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_bytes(pid: int) -> int:
    try:
        import psutil

        return int(psutil.Process(pid).memory_info().rss)
    except ImportError:
        pass
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_SIZE


def group_cpu_seconds(pgids: set[int]) -> dict[int, tuple[int, float]]:
    """pid → (process group, CPU seconds) of every live process in one of `pgids` (a /proc scan)."""
    out: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pgrp = int(fields[2])
        if pgrp in pgids:
            out[int(entry)] = (pgrp, (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return out


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, all cores added up."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values[:8])
    return (total - idle) / CLK_TCK, total / CLK_TCK


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system
