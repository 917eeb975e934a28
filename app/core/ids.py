"""Identifiers: ULIDs, which sort by creation time (the keyset cursors of every listing rely on it).

One function, so every table's ids come from the same source.
"""

from __future__ import annotations

from ulid import ULID


def new_id() -> str:
    return str(ULID())
