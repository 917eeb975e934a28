"""Idle CPU: what a worker process burns with nothing to do (its poll loop), in % of one core.

Measured by the pickup phase on the worker it has just used, for ours and for raw arq alike.
"""

from __future__ import annotations

import asyncio
import time

from bench.common import IDLE_SECONDS
from bench.procs import cpu_seconds

SETTLE_S = 1.0  # let the last job's tail (result writes, log lines) finish before the clock starts


async def idle_cpu_pct(pid: int) -> float:
    """CPU of process `pid` over IDLE_SECONDS, starting SETTLE_S after its last job, in % of one core."""
    await asyncio.sleep(SETTLE_S)
    before, began = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(IDLE_SECONDS)
    return 100.0 * (cpu_seconds(pid) - before) / (time.monotonic() - began)
