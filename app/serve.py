"""`python -m app.serve [uvicorn options]`: the API as API_WORKERS uvicorn processes (0 = one per core).

Migrations and bootstrap are not done here: they run once before (compose's `migrate`, `make run`'s launcher).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import uvicorn

from app.core.config import get_settings
from app.core.metrics import MULTIPROCESS_ENV


def cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def worker_count(api_workers: int) -> int:
    return api_workers if api_workers > 0 else cores()


def main(argv: list[str] | None = None) -> None:
    """uvicorn's own command line for `app.main:app`, with `--workers` from API_WORKERS unless given. With
    several workers uvicorn's supervisor starts each one as a fresh process that imports the app itself:
    nothing opened here (no engine, no pool) is shared across them."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not any(a == "--workers" or a.startswith("--workers=") for a in args):
        args += ["--workers", str(worker_count(get_settings().api_workers))]
    if _workers(args) > 1 and not os.environ.get(MULTIPROCESS_ENV):
        # Every process counts into files of this run's own directory; each /metrics adds them all up.
        directory = tempfile.mkdtemp(prefix="report-orchestrator-metrics-")
        os.environ[MULTIPROCESS_ENV] = directory
        try:
            uvicorn.main.main(args=["app.main:app", *args], prog_name="app.serve")
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        return
    uvicorn.main.main(args=["app.main:app", *args], prog_name="app.serve")


def _workers(args: list[str]) -> int:
    for index, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith("--workers=") else None
        if arg == "--workers" and index + 1 < len(args):
            value = args[index + 1]
        if value is not None:
            return int(value) if value.isdigit() else 1
    return 1


if __name__ == "__main__":
    main()
