"""The model tests' world: the suite's MariaDB and Redis (tests/conftest.py), the model's settings and report
types, no heartbeat loops of their own, and a seam that makes an insert slow.

Hypothesis drives the model from a thread: each step is a coroutine run on the test's own event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.attempts import runner
from app.jobs import service as jobs
from app.models import ReportJob
from tests.model.machine import Bridge
from tests.utils.model_world import register_types, unregister_types
from tests.utils.model_world_ops import MODEL_ENV


async def _no_heartbeat_loop(*_args: Any) -> None:
    """The model beats for live runners itself (a dead worker's runner must fall silent)."""
    await asyncio.Event().wait()


@pytest.fixture
async def model_bridge(env: Any, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Bridge]:
    await env.set(**MODEL_ENV)
    bridge = Bridge(asyncio.get_running_loop())
    insert_ordered = jobs._insert_ordered

    async def slow_insert_ordered(job: ReportJob) -> Any:
        if bridge.world is not None:
            await bridge.world.insert_ordered_gate(job)
        return await insert_ordered(job)

    monkeypatch.setattr(jobs, "_insert_ordered", slow_insert_ordered)
    monkeypatch.setattr(runner, "_heartbeat_loop", _no_heartbeat_loop)
    register_types()
    try:
        yield bridge
    finally:
        bridge.stopped = True
        unregister_types()
