"""In-process burst workers that run the queue (or the dead-letter channel) until it is empty."""

from __future__ import annotations

import asyncio
from typing import Any

from arq.worker import Worker


def build_worker(**overrides: Any) -> Worker:
    from workers.base import OrchestratorWorker
    from workers.report_worker import worker_options

    options = worker_options()
    options.update(burst=True, poll_delay=0.01, handle_signals=False)
    options.update(overrides)
    return OrchestratorWorker(**options)


async def drain(*, workers: int = 1, timeout_s: float = 60, **overrides: Any) -> None:
    """Run burst workers until the queue (deferred retries included) is empty."""
    built = [build_worker(**overrides) for _ in range(workers)]
    try:
        await asyncio.wait_for(asyncio.gather(*(w.main() for w in built)), timeout_s)
    finally:
        for w in built:
            await w.close()


async def drain_alerts(timeout_s: float = 60, **overrides: Any) -> None:
    """Run a burst dead-letter consumer until the failed channel is empty."""
    from workers.base import OrchestratorWorker
    from workers.dead_letter import worker_options

    options = worker_options()
    options.update(burst=True, poll_delay=0.01, handle_signals=False)
    options.update(overrides)
    worker = OrchestratorWorker(**options)
    try:
        await asyncio.wait_for(worker.main(), timeout_s)
    except asyncio.CancelledError:
        pass
    finally:
        await worker.close()
