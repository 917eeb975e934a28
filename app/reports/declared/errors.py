"""What a report-types file that cannot be used raises: the field and the reason, to which the loader adds
the file, the line and the type's name (`file:line: type 'x', field 'sql': reason`).
"""

from __future__ import annotations


class DeclarationError(ValueError):
    """A declared report type (or the whole file) refused at load. A kind's parse function raises it with
    the field of the type's table at fault and why; the loader then locates it in the file."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}" if field else reason)
        self.field = field
        self.reason = reason
        self.file: str | None = None
        self.line: int | None = None
        self.type_name: str | None = None

    def located(self, file: str, line: int | None, type_name: str | None = None) -> DeclarationError:
        """The same error, placed in its file (the loader calls this; kinds need not)."""
        self.file, self.line = file, line
        if type_name is not None:
            self.type_name = type_name
        return self

    def where(self) -> str:
        """`file:line`, as editors and CI logs link it ("file" alone when the line is unknown)."""
        if self.file is None:
            return ""
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def __str__(self) -> str:
        what = f"report type {self.type_name!r}" if self.type_name else ""
        if self.field:
            what = f"{what}, field {self.field!r}" if what else f"field {self.field!r}"
        head = ": ".join(part for part in (self.where(), what) if part)
        return f"{head}: {self.reason}" if head else self.reason

    def as_dict(self) -> dict[str, object]:
        """What `GET /v1/report-types/declarations` and the metrics' log line show of it."""
        return {
            "file": self.file,
            "line": self.line,
            "type": self.type_name,
            "field": self.field or None,
            "reason": self.reason,
        }
