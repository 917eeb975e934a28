"""The start-up heap is frozen out of the cyclic GC (full collections no longer walk it) and young
collections run less often; objects made afterwards are still collected."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from app.core.heap import GC_THRESHOLDS, freeze_startup_heap


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_the_startup_heap_is_frozen_and_later_cycles_are_still_collected(restored_gc: None) -> None:
    freeze_startup_heap()
    assert gc.get_freeze_count() > 1000
    assert gc.get_threshold() == GC_THRESHOLDS

    class Node:
        def __init__(self) -> None:
            self.me = self

    Node()
    assert gc.collect() >= 1  # the cycle made after the freeze
