"""Child processes of the benchmark (devtools/children.py: own session, dying with us) and what they cost:
CPU time and RSS of processes, process groups and the machine (psutil when installed, else /proc)."""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from devtools import children

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
STOP_TIMEOUT_S = 15.0


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

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        # SIGTERM to the child alone: Celery's prefork parent stops its own pool children, in order.
        # The SIGKILL that follows goes to the whole group and sweeps up whatever outlived the parent.
        children.stop_group(self.popen, timeout_s, term_group=False)
        self._log.close()
        PROCS.discard(self)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


PROCS: set[Proc] = set()


def spawn(name: str, argv: Sequence[str], env: dict[str, str], cwd: Path, log_dir: Path) -> Proc:
    """Start `argv` with its output in <log_dir>/<name>.log; stop_all() stops whatever is still running."""
    log_path = log_dir / f"{name}.log"
    log = log_path.open("ab")
    # Every spawn comes from the main thread (the event loop's), which lives as long as the run:
    # PDEATHSIG is tied to the spawning thread.
    popen = children.spawn(argv, env=env, cwd=cwd, stdout=log)
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


def children_cpu_seconds() -> float:
    """CPU seconds of our reaped children (the load generator runs to its end as one)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class CpuMeter:
    """CPU used between start() and stop() by named process groups, by us, and by the whole machine.

    Figures are % of one core; `others` is what the machine spent on processes this run did not start
    (e.g. another test-suite on the same host), which makes a figure noisy.
    """

    groups: dict[str, int]
    began: float = 0.0
    before: dict[int, tuple[int, float]] = field(default_factory=dict)
    machine_before: tuple[float, float] = (0.0, 0.0)
    own_before: float = 0.0
    children_before: float = 0.0

    def start(self) -> CpuMeter:
        self.before = group_cpu_seconds(set(self.groups.values()))
        self.machine_before = machine_busy_seconds()
        self.own_before = own_cpu_seconds()
        self.children_before = children_cpu_seconds()
        self.began = time.monotonic()
        return self

    def stop(self) -> dict[str, float]:
        elapsed = time.monotonic() - self.began
        after = group_cpu_seconds(set(self.groups.values()))
        machine = machine_busy_seconds()
        per_group = dict.fromkeys(self.groups.values(), 0.0)
        for pid, (pgrp, seconds) in after.items():
            per_group[pgrp] += seconds - self.before.get(pid, (pgrp, 0.0))[1]
        out = {name: round(100.0 * per_group[pgid] / elapsed, 1) for name, pgid in self.groups.items()}
        out["bench_runner"] = round(100.0 * (own_cpu_seconds() - self.own_before) / elapsed, 1)
        out["load_generator"] = round(100.0 * (children_cpu_seconds() - self.children_before) / elapsed, 1)
        out["machine"] = round(100.0 * (machine[0] - self.machine_before[0]) / elapsed, 1)
        out["others"] = round(out["machine"] - sum(v for k, v in out.items() if k != "machine"), 1)
        return out
