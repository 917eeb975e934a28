"""Raw arq baseline: a no-op function under our worker's arq settings, no MySQL, no state tracking.

`arq bench.raw_arq.WorkerSettings`; BENCH_RAW_POLL_DELAY sets poll_delay, BENCH_RAW_RECORD=1 records pickups.
"""

from __future__ import annotations

import os
import time
from typing import Any

from arq.worker import func

from workers.common import restore_plain_arq
from workers.report_worker import worker_options

# Importing our worker patches arq's Worker (wake-driven, resilient loop): the baseline runs arq as shipped.
restore_plain_arq()

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
    """Our worker's options (max_jobs, poll_delay, keep_result, timeouts…) with only the function swapped."""
    opts = worker_options()
    opts.update(
        functions=[func(bench_noop, name=RAW_FUNCTION, max_tries=opts.get("max_tries", 5))],
        queue_name=RAW_QUEUE,
        on_startup=startup,
        on_shutdown=None,
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
