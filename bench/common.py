"""What every benchmark phase shares: the knobs and fixed parameters of a run, and small helpers.

Only the standard library at import time: bench/run.py may still have to install the bench group first.
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# BENCH_RESULTS_DIR: where a run writes its <stem>.json and .md (smoke runs point it away from bench/results).
RESULTS_DIR = Path(os.environ.get("BENCH_RESULTS_DIR") or ROOT / "bench" / "results")

# ---- scale and fixed parameters ------------------------------------------------------------------
# Knobs (environment): BENCH_SCALE (1; 0.1 for a quick try; results named <date>-scale0.1.*),
# BENCH_PHASES (submit,bulk,drain,pickup,memory; add metrics for issue 12's figures, fairness for issue
# 16's), BENCH_MYSQL_FLUSH (1, MariaDB's default; 2 = no fsync per commit), BENCH_NO_WRK=1 (use
# bench/loadgen.py), BENCH_BUDGET_S
# (560: the memory phase is cut short, and says so, to keep the whole run under 10 minutes),
# BENCH_API_WORKERS (uvicorn processes serving the API under test and its trivial POST alike; default: the
# machine's cores, as API_WORKERS under `make run`), BENCH_RESULTS_DIR (bench/results).
# Scale phase (issue 28, BENCH_PHASES=scale): BENCH_SCALE_SIZES (0,1000000,10000000 finished jobs, times
# BENCH_SCALE), BENCH_SCALE_DROP_INDEXES (1: secondary indexes dropped for a fill and rebuilt after),
# BENCH_SCALE_FILL_BUDGET_S (1500: a size whose fill would take longer is cut at what fits, and says so),
# BENCH_SCALE_EXPLAIN (1: past the first size, each figure's statements replayed under ANALYZE).
# SQL reports (issue 30, BENCH_PHASES=sql_reports): BENCH_SQL_ROWS (1000000 times BENCH_SCALE) rows to CSV and
# XLSX by a declared SQL report type on one worker process.

SCALE = float(os.environ.get("BENCH_SCALE", "1"))
PHASES = ("submit", "bulk", "drain", "pickup", "memory")  # the default
# In the order they run; BENCH_PHASES=metrics for issue 12's figures, fairness for issue 16's (both opt-in:
# the default run would not fit its 10-minute budget with them). Fairness runs before memory, which takes
# what the budget leaves.
ALL_PHASES = ("submit", "bulk", "drain", "pickup", "fairness", "memory", "metrics", "scale", "sql_reports")
CONCURRENCY = 64
SUBMIT_SECONDS = max(2.0, 10.0 * min(SCALE, 1.0))
WARMUP_SECONDS = 2.0 if SCALE >= 1 else 1.0
API_WORKERS = max(1, int(os.environ.get("BENCH_API_WORKERS") or len(os.sched_getaffinity(0))))
BULK_BATCH = 500  # issue 15: bulk submit measured with batches of 500
BULK_CLIENTS = 4  # concurrent clients, each with one batch in flight
BULK_SECONDS = SUBMIT_SECONDS
DRAIN_JOBS = max(100, round(10_000 * SCALE))
PICKUP_SAMPLES = max(10, round(50 * SCALE))
IDLE_SECONDS = max(2.0, 5.0 * min(SCALE, 1.0))
MEMORY_JOBS = max(500, round(50_000 * SCALE))
# Fairness (issue 16): tenant A's backlog, then tenant B's few jobs behind it.
FAIRNESS_A_JOBS = max(500, round(2_000 * SCALE))
FAIRNESS_B_JOBS = 10
FAIRNESS_B_TENANT = "bench-b"
# Scale (issue 28): a backlog of a paused tenant at every size, the drain's jobs, the purge's expired slice.
SCALE_BACKLOG = max(1_000, round(100_000 * SCALE))
SCALE_DRAIN_JOBS = max(2, round(5_000 * SCALE / BULK_BATCH)) * BULK_BATCH
SCALE_PURGE_ROWS = max(2_000, round(50_000 * SCALE))
SCALE_DROP_INDEXES = os.environ.get("BENCH_SCALE_DROP_INDEXES", "1") != "0"
SCALE_EXPLAIN = os.environ.get("BENCH_SCALE_EXPLAIN", "1") != "0"
SCALE_FILL_BUDGET_S = float(os.environ.get("BENCH_SCALE_FILL_BUDGET_S", "1500"))
SCALE_BUFFER_POOL_MB = 512
SCALE_REDO_LOG_MB = 1024
DRAIN_TIMEOUT_S = 240.0
STALL_S = 30.0  # no progress for this long: the run is broken, stop it rather than wait out the timeout
# The whole run must stay under 10 minutes: the memory phase, last, is cut short (and says so) to fit.
RUN_BUDGET_S = float(os.environ.get("BENCH_BUDGET_S", "560"))
RUN_STARTED = time.monotonic()
MYSQL_COUNTERS = (
    "Questions", "Com_select", "Com_insert", "Com_update", "Com_delete", "Com_commit", "Com_rollback",
    "Innodb_data_fsyncs", "Innodb_os_log_written",
)  # fmt: skip
TENANT = "bench"
CELERY_DB = "celery_results"
JOB_BODY = '{"report_type":"bench.noop","params":{}}'
# MariaDB's own default is 1 (fsync the redo log at every commit); the test harness relaxes it to 2.
MYSQL_FLUSH_AT_COMMIT = os.environ.get("BENCH_MYSQL_FLUSH", "1")


def wanted_phases() -> list[str]:
    """The phases BENCH_PHASES asks for, in the order given (the default five when unset)."""
    wanted = [p.strip() for p in os.environ.get("BENCH_PHASES", ",".join(PHASES)).split(",") if p.strip()]
    unknown = sorted(set(wanted) - set(ALL_PHASES))
    if unknown:
        raise SystemExit(
            f"BENCH_PHASES: unknown phase(s) {', '.join(unknown)}; known: {', '.join(ALL_PHASES)}"
        )
    return wanted


def scale_sizes() -> list[int]:
    """The scale phase's table sizes (finished jobs): BENCH_SCALE_SIZES times BENCH_SCALE, ascending."""
    raw = os.environ.get("BENCH_SCALE_SIZES", "0,1000000,10000000")
    try:
        sizes = sorted({round(float(s) * SCALE) for s in raw.split(",") if s.strip()})
    except ValueError as exc:
        raise SystemExit(f"BENCH_SCALE_SIZES: {raw!r} is not a list of numbers") from exc
    if not sizes or sizes[0] < 0:
        raise SystemExit(f"BENCH_SCALE_SIZES: {raw!r}: give sizes ≥ 0, e.g. 0,1000000,10000000")
    return sizes


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def dephase(poll_delay_s: float) -> float:
    """A pause between two pickup samples that lands at a uniformly random point of the poll cycle."""
    return 0.05 + random.uniform(0, max(poll_delay_s, 0.05))


def run_cmd(argv: Sequence[str], env: dict[str, str] | None = None, timeout_s: float = 120) -> str:
    """Run a command to the end and return its stdout; raise with the tail of its stderr if it fails."""
    done = subprocess.run(
        list(argv), cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])}… failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def version_of(argv: Sequence[str]) -> str:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
