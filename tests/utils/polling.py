"""Waiting for a condition with a deadline, for tests that watch other processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def eventually(
    check: Callable[[], Any | Awaitable[Any]], within_s: float, what: str, interval: float = 0.2
) -> Any:
    """Call `check` until it returns something truthy; returns it."""
    deadline = time.monotonic() + within_s
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within_s:g} s waiting for {what}")
        await asyncio.sleep(interval)
