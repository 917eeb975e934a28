"""Child processes that do not outlive their parent: each in its own session (so its own process group),
SIGTERMed when the parent dies (Linux), stopped with SIGTERM then SIGKILL of its whole group.

Used by `make run` (devtools/run.py) and the benchmark (bench/procs.py); the test harness can use it too.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO

__all__ = [
    "exit_reason",
    "exited",
    "kill_group",
    "pump_lines",
    "read_first_line",
    "send",
    "spawn",
    "stop_group",
    "stop_groups",
]

#: Where a child's stdin/stdout/stderr goes: subprocess.PIPE / DEVNULL / STDOUT, an open binary file, or
#: None (inherit ours).
Stream = int | IO[bytes] | None

PR_SET_PDEATHSIG = 1
#: How long to wait for a SIGKILLed child to be reaped (only a process stuck in the kernel takes longer).
REAP_TIMEOUT_S = 10.0
_POLL_INTERVAL_S = 0.05
_HAS_WAITID = hasattr(os, "waitid")  # not on macOS


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


# Resolved before any fork so that a child does no dlopen/dlsym between fork and exec.
_PRCTL = _load_prctl()


def _pdeathsig_preexec(parent_pid: int) -> Callable[[], None]:
    """preexec_fn: have the kernel SIGTERM this child when its parent dies, however the parent dies."""
    sig = int(signal.SIGTERM)

    def preexec() -> None:
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    stdin: Stream = subprocess.DEVNULL,
    stdout: Stream = None,
    stderr: Stream = subprocess.STDOUT,
    new_group: bool = True,
    die_with_parent: bool = True,
) -> subprocess.Popen[bytes]:
    """Start `argv`; by default in a session of its own and SIGTERMed by the kernel when we die (Linux).

    new_group: its own session, so Ctrl-C in the terminal reaches only us (we stop the children ourselves)
    and stop_group()/kill_group() can reach its grandchildren too.
    die_with_parent: PR_SET_PDEATHSIG, set in a preexec_fn. Two limits. For the kernel the "parent" is the
    *thread* that spawns: spawn from a thread that lives as long as the child, never from an executor
    thread that may be retired (the child would be SIGTERMed then). And CPython documents preexec_fn as
    unsafe once other threads run (a lock held by another thread at fork time can hang the child); ours
    only calls prctl and getppid, but a caller that wants no such risk passes
    `die_with_parent=threading.active_count() == 1`, as devtools/run.py does.
    """
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        start_new_session=new_group,
        preexec_fn=_pdeathsig_preexec(os.getpid()) if die_with_parent else None,
    )


def exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the child has exited, without reaping it.

    An unreaped child keeps its PID, and so its process-group ID, from being given to a new process:
    stop_groups() therefore SIGKILLs a group before it reaps the group's leader, never after.
    """
    if proc.returncode is not None:
        return True
    if not _HAS_WAITID:
        return proc.poll() is not None
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped behind Popen's back
        return proc.poll() is not None


def send(proc: subprocess.Popen[bytes], sig: int, *, whole_group: bool = False) -> None:
    """Send `sig` to the child, or to its whole process group; a child that is gone is skipped."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if whole_group:
            os.killpg(proc.pid, sig)
        elif not exited(proc):  # PID still ours (at worst a zombie): never signal a recycled one
            os.kill(proc.pid, sig)


def stop_groups(
    procs: Iterable[subprocess.Popen[bytes]],
    timeout_s: float,
    *,
    term_group: bool = True,
    give_up: Callable[[], bool] | None = None,
) -> list[subprocess.Popen[bytes]]:
    """SIGTERM each child, wait up to `timeout_s` for all of them, then SIGKILL each one's process group
    and reap them. Returns the children that were still running when the wait ended (they were killed).

    term_group=False sends the SIGTERM to each child alone, for a parent that stops its own children in
    order (Celery's prefork pool); the SIGKILL always goes to the whole group, which also sweeps up
    grandchildren that outlived their leader. `give_up`, polled while waiting, ends the wait early
    (a second Ctrl-C).
    """
    group = list(procs)
    for proc in group:
        if not exited(proc):
            send(proc, signal.SIGTERM, whole_group=term_group)
    deadline = time.monotonic() + timeout_s
    running = [proc for proc in group if not exited(proc)]
    while running and time.monotonic() < deadline and not (give_up is not None and give_up()):
        time.sleep(_POLL_INTERVAL_S)
        running = [proc for proc in running if not exited(proc)]
    for proc in group:
        send(proc, signal.SIGKILL)  # the leader itself, in case it was spawned without a group of its own
        send(proc, signal.SIGKILL, whole_group=True)
    for proc in group:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=REAP_TIMEOUT_S)
    return running


def stop_group(proc: subprocess.Popen[bytes], timeout_s: float, *, term_group: bool = True) -> bool:
    """stop_groups() for one child: True if it exited by itself within `timeout_s`, False if killed."""
    return not stop_groups([proc], timeout_s, term_group=term_group)


def kill_group(proc: subprocess.Popen[bytes], reap_timeout_s: float = REAP_TIMEOUT_S) -> int:
    """SIGKILL the child and its whole process group (a crash), reap it and return its exit status."""
    send(proc, signal.SIGKILL)
    send(proc, signal.SIGKILL, whole_group=True)
    return proc.wait(timeout=reap_timeout_s)


def pump_lines(proc: subprocess.Popen[bytes], on_line: Callable[[str], None], name: str) -> threading.Thread:
    """Hand each line the child writes to its stdout (a PIPE) to `on_line`, from a daemon thread, until EOF.

    Lines lose their line ending; bytes that are not UTF-8 become U+FFFD rather than ending the pump.
    """
    stream = proc.stdout
    if stream is None:
        raise ValueError(f"{name}: spawn the child with stdout=subprocess.PIPE")

    def pump() -> None:
        with contextlib.suppress(OSError, ValueError):  # the pipe closed under us: nothing more to read
            for raw in stream:
                on_line(raw.decode(errors="replace").rstrip("\r\n"))

    thread = threading.Thread(target=pump, name=f"out-{name}", daemon=True)
    thread.start()
    return thread


def read_first_line(
    proc: subprocess.Popen[bytes], timeout_s: float, *, give_up: Callable[[], bool] | None = None
) -> tuple[str | None, str]:
    """Wait up to `timeout_s` for the first line a child writes to its stdout (a PIPE): a start-up handshake.

    Returns (that line, whatever was read past it). The line is None when the child closed its stdout, the
    time ran out or `give_up()` said so first; the second item then holds all the child did write.
    """
    stream = proc.stdout
    if stream is None:
        raise ValueError("spawn the child with stdout=subprocess.PIPE")
    buffer = b""
    deadline = time.monotonic() + timeout_s
    while b"\n" not in buffer:
        if time.monotonic() > deadline or (give_up is not None and give_up()):
            return None, buffer.decode(errors="replace")
        # select and os.read rather than readline(): a read blocked on a silent child could not be cut short,
        # and nothing is left in a Python-side buffer for a later pump_lines() to miss.
        ready, _, _ = select.select([stream], [], [], 0.2)
        if ready:
            chunk = os.read(stream.fileno(), 4096)
            if not chunk:
                return None, buffer.decode(errors="replace")
            buffer += chunk
    first, _, rest = buffer.partition(b"\n")
    return first.decode(errors="replace").rstrip("\r"), rest.decode(errors="replace")


def exit_reason(returncode: int) -> str:
    """'exit code 3' or 'killed by SIGKILL', from a Popen returncode."""
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-returncode).name}"
    return f"exit code {returncode}"
