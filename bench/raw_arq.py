"""Raw arq baseline: a no-op function under our worker's arq settings, no MySQL, no state tracking.

Started with arq's own CLI, `python -m arq bench.raw_arq.WorkerSettings`, so it runs arq's plain Worker class;
BENCH_RAW_POLL_DELAY sets poll_delay, BENCH_RAW_RECORD=1 records pickups.
"""

from __future__ import annotations

import inspect
import os
import time
from typing import Any

from arq.worker import Worker, func

from workers.report_worker import worker_options

RAW_QUEUE = "bench:raw-arq"
RAW_FUNCTION = "bench_noop"
STARTED_PREFIX = "bench:started:"


async def bench_noop(ctx: dict[str, Any]) -> None:
    """Does nothing; in record mode pushes its start time for the pickup-latency measurement."""
    if ctx.get("bench_record"):
        await ctx["redis"].rpush(f"{STARTED_PREFIX}{ctx['job_id']}", repr(time.time()))


async def startup(ctx: dict[str, Any]) -> None:
    ctx["bench_record"] = os.environ.get("BENCH_RAW_RECORD") == "1"


def options() -> dict[str, Any]:
    """Our worker's options (max_jobs, poll_delay, keep_result, timeouts…) with only the function swapped.

    Options that only our Worker subclass (workers/base.py) understands are left out: arq's CLI builds its
    own plain `arq.worker.Worker`, which is the point of the baseline.
    """
    plain = set(inspect.signature(Worker.__init__).parameters)
    opts = {key: value for key, value in worker_options().items() if key in plain}
    opts.update(
        functions=[func(bench_noop, name=RAW_FUNCTION, max_tries=opts.get("max_tries", 5))],
        queue_name=RAW_QUEUE,
        on_startup=startup,
        on_shutdown=None,
        # No code of ours may run in the baseline, should our options ever gain per-job hooks.
        on_job_start=None,
        on_job_end=None,
        after_job_end=None,
    )
    if os.environ.get("BENCH_RAW_POLL_DELAY"):
        opts["poll_delay"] = float(os.environ["BENCH_RAW_POLL_DELAY"])
    return opts


def pool_kwargs() -> dict[str, Any]:
    """What `arq.create_pool` needs to enqueue for this worker: its queue and its message serializer."""
    opts = options()
    kwargs: dict[str, Any] = {"default_queue_name": RAW_QUEUE}
    for key in ("job_serializer", "job_deserializer"):
        if opts.get(key) is not None:
            kwargs[key] = opts[key]
    return kwargs


WorkerSettings = type("WorkerSettings", (), options())
