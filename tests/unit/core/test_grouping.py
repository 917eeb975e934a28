"""Group commit hands a decision made for a caller that was cancelled meanwhile to `on_cancelled`, once."""

from __future__ import annotations

import asyncio

import pytest

from app.core.grouping import GroupCommit


async def test_a_cancelled_callers_decision_is_handed_back_once_and_the_others_get_theirs() -> None:
    flushing, release = asyncio.Event(), asyncio.Event()
    batches: list[list[str]] = []
    handed_back: list[tuple[str, str]] = []
    undone = asyncio.Event()

    async def flush(items: list[str]) -> list[str | BaseException]:
        batches.append(items)
        flushing.set()
        await release.wait()
        return [f"started {item}" for item in items]

    async def on_cancelled(item: str, decision: str) -> None:
        handed_back.append((item, decision))
        undone.set()

    group = GroupCommit(flush, on_cancelled=on_cancelled)
    callers = {name: asyncio.create_task(group.submit(name)) for name in ("a", "b", "c")}
    await asyncio.wait_for(flushing.wait(), timeout=5)
    callers["b"].cancel()  # e.g. the worker shuts down while b's start is being committed
    with pytest.raises(asyncio.CancelledError):
        await callers["b"]
    assert handed_back == []  # nothing is decided yet: the flush is still running

    release.set()
    assert await callers["a"] == "started a"
    assert await callers["c"] == "started c"
    await asyncio.wait_for(undone.wait(), timeout=5)
    for _ in range(10):  # room for a second hand-back, if there were one
        await asyncio.sleep(0)

    assert batches == [["a", "b", "c"]]
    assert handed_back == [("b", "started b")]
