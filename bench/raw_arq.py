"""Raw arq baseline: a no-op function, no MySQL, no state tracking, under our worker's arq settings or, with
BENCH_RAW_DEFAULTS=1, arq's own defaults (poll_delay 0.5 s, max_jobs 10, keep_result 3600 s, pickle).

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
# arq's defaults, spelled out so the report can name them (checked against arq.worker.Worker below).
ARQ_DEFAULTS = {"poll_delay": 0.5, "max_jobs": 10}


async def bench_noop(ctx: dict[str, Any]) -> None:
    """Does nothing; in record mode pushes its start time for the pickup-latency measurement."""
    if ctx.get("bench_record"):
        await ctx["redis"].rpush(f"{STARTED_PREFIX}{ctx['job_id']}", repr(time.time()))


async def startup(ctx: dict[str, Any]) -> None:
    ctx["bench_record"] = os.environ.get("BENCH_RAW_RECORD") == "1"


def defaults_mode() -> bool:
    return os.environ.get("BENCH_RAW_DEFAULTS") == "1"


def options(defaults: bool | None = None) -> dict[str, Any]:
    """Our worker's options (max_jobs, poll_delay, keep_result, timeouts…) with only the function swapped;
    with `defaults` (BENCH_RAW_DEFAULTS=1), arq's defaults instead: only the Redis address is ours.

    Options that only our Worker subclass (workers/base.py) understands are left out: arq's CLI builds its
    own plain `arq.worker.Worker`, which is the point of the baseline.
    """
    signature = inspect.signature(Worker.__init__).parameters
    if defaults is None:
        defaults = defaults_mode()
    if defaults:
        for key, value in ARQ_DEFAULTS.items():
            if signature[key].default != value:
                raise RuntimeError(f"arq's default {key} is {signature[key].default}, not {value}")
        opts: dict[str, Any] = {"redis_settings": worker_options()["redis_settings"]}
    else:
        opts = {key: value for key, value in worker_options().items() if key in signature}
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


def settings_in_effect(defaults: bool = False) -> dict[str, Any]:
    """The settings a reader compares (poll delay, concurrency, result keeping), arq's defaults filled in."""
    opts = options(defaults)
    signature = inspect.signature(Worker.__init__).parameters
    keys = ("poll_delay", "max_jobs", "keep_result")
    return {key: opts.get(key, signature[key].default) for key in keys}


def pool_kwargs(defaults: bool = False) -> dict[str, Any]:
    """What `arq.create_pool` needs to enqueue for this worker: its queue and its message serializer."""
    opts = options(defaults)
    kwargs: dict[str, Any] = {"default_queue_name": RAW_QUEUE}
    for key in ("job_serializer", "job_deserializer"):
        if opts.get(key) is not None:
            kwargs[key] = opts[key]
    return kwargs


WorkerSettings = type("WorkerSettings", (), options())
