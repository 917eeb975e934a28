"""The start-up heap kept out of Python's cyclic garbage collector, for every long-running process.

A full (generation 2) collection walks every tracked object: in the API that was ~86 ms each, two or three a
second under load — the whole p99. Frozen objects (the imported modules, the app, the schemas: everything
alive once start-up is done) are never walked again; objects made later are collected as usual.
"""

from __future__ import annotations

import gc

# A young-generation collection every 10,000 net allocations instead of 700: a request's objects mostly die
# (by reference count) before one runs, so far fewer survive into the older generations to be walked again.
GC_THRESHOLDS = (10_000, 20, 10)


def freeze_startup_heap() -> None:
    """Collect what start-up left behind, then freeze the rest (`gc.freeze`); call once start-up is done."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
