"""Identifiers: ULIDs, which sort by creation time (the keyset cursors of every listing rely on it).

One function, so every table's ids come from the same source.
"""

from __future__ import annotations

import re

from ulid import ULID

# What a ULID looks like (Crockford base32, 26 characters): ids are checked against it before any lookup.
ULID_RE = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")


def new_id() -> str:
    return str(ULID())
