"""Group commit: callers that arrive while a flush is running share the next one (one transaction, one
Redis round trip), while an idle caller is flushed at once, so latency is unchanged when there is no load.

The flush decides each item alone: it returns one result or exception per item, in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

Flush = Callable[[list[T]], Awaitable[Sequence[R | BaseException]]]


class GroupCommit(Generic[T, R]):
    """Leader/follower batching in one event loop.

    The first `submit` starts a flush task; everything submitted before that task runs, or while a flush
    is in flight, goes into the next flush (at most `max_batch` items each). If the flush itself raises,
    every item of that batch gets the exception. A caller cancelled while it waits does not stop the flush:
    its item may still be applied (`submit` callers that must undo it use `on_cancelled`).
    """

    def __init__(
        self,
        flush: Flush[T, R],
        max_batch: int = 100,
        on_cancelled: Callable[[T, R], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        self._flush = flush
        self.max_batch = max_batch
        self._on_cancelled = on_cancelled
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._leader: asyncio.Task[None] | None = None
        self.flushes = 0  # batches flushed so far (tests and the profile read it)
        self.items = 0

    async def submit(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        future.add_done_callback(_retrieve)  # a cancelled caller's failed item must not warn at exit
        self._pending.append((item, future))
        if self._leader is None or self._leader.done() or self._leader.get_loop() is not loop:
            self._leader = loop.create_task(self._lead())
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if self._on_cancelled is not None:
                future.add_done_callback(lambda done: self._undo(item, done))
            raise

    def _undo(self, item: T, future: asyncio.Future[R]) -> None:
        if future.cancelled() or future.exception() is not None or self._on_cancelled is None:
            return
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(
            self._on_cancelled(item, future.result())
        )
        _background.add(task)
        task.add_done_callback(_background.discard)

    async def _lead(self) -> None:
        while self._pending:
            batch = self._pending[: self.max_batch]
            del self._pending[: len(batch)]
            self.flushes += 1
            self.items += len(batch)
            try:
                results = await self._flush([item for item, _ in batch])
            except asyncio.CancelledError:
                for _, future in [*batch, *self._pending]:
                    future.cancel()
                self._pending.clear()
                raise
            except Exception as exc:  # handed to every waiter of this batch
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if future.done():
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


# Tasks started for cancelled callers, kept referenced until they end.
_background: set[asyncio.Task[None]] = set()
