"""The error a declared report type's definition raises when it cannot be loaded: which field, and why.

Shared by every kind (sql, http) and the loader, which adds the file and line.
"""

from __future__ import annotations


class DeclarationError(ValueError):
    """A declaration refused at load: `field` names the offending key, `reason` says what is wrong."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
