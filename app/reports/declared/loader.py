"""A report-types file (TOML) to `ReportType`s: the common fields checked here, each kind's own by its
plug-in (app/reports/declared/kinds.py); any refusal names the file, the line, the type and the field.
"""

from __future__ import annotations

import asyncio
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.reports.declared.errors import DeclarationError
from app.reports.declared.kinds import KINDS, Kind
from app.reports.declared.params import check_schema, params_model
from app.reports.registry import ReportType, registry

TOP_TABLE = "report_types"
COMMON_FIELDS = ("description", "params", "timeout_s", "max_attempts", "priority", "max_concurrency", "kind")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_TIMEOUT_S = 86_400.0  # workers size arq's own limit on it (workers/common.py)
NO_PARAMS: dict[str, Any] = {"type": "object", "additionalProperties": False}


@dataclass(frozen=True)
class Declared:
    """One declared type: the registry's entry, its kind and spec (for the kind's `check`), its line."""

    rtype: ReportType
    kind: Kind
    spec: Any
    line: int | None


# ---- where in the file ----------------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*\[(?!\[)\s*(.+?)\s*\]\s*(?:#.*)?$")
_KEY_PART = re.compile(r"\s*(?:\"((?:[^\"\\]|\\.)*)\"|'([^']*)'|([A-Za-z0-9_-]+))\s*(\.|$)")


def _dotted(key: str) -> tuple[str, ...] | None:
    parts: list[str] = []
    pos = 0
    while pos < len(key):
        found = _KEY_PART.match(key, pos)
        if found is None:
            return None
        parts.append(next(g for g in found.groups()[:3] if g is not None))
        pos = found.end()
    return tuple(parts)


def _headers(text: str) -> Iterator[tuple[int, tuple[str, ...]]]:
    for number, line in enumerate(text.splitlines(), 1):
        found = _HEADER.match(line)
        if found:
            path = _dotted(found.group(1))
            if path:
                yield number, path


def locate(text: str, type_name: str | None, field: str = "") -> int | None:
    """The line of `field` in the type's table (a `field = …` line, or a `[report_types."name".field…]`
    header), else of the type's header; None when neither is found (then the file alone is named)."""
    if type_name is None:
        return None
    lines = text.splitlines()
    table = (TOP_TABLE, type_name)
    headers = list(_headers(text))
    start = next((n for n, path in headers if path == table), None)
    head = field.split(".")[0]
    if start is None:
        return None
    if head:
        end = next((n for n, _ in headers if n > start), len(lines) + 1)
        key = re.compile(rf"^\s*(?:{re.escape(head)}|\"{re.escape(head)}\"|'{re.escape(head)}')\s*[=.]")
        for number in range(start + 1, end):
            if key.match(lines[number - 1]):
                return number
        for number, path in headers:
            if path[:3] == (*table, head):
                return number
    return start


def _toml_line(message: str) -> int | None:
    found = re.search(r"at line (\d+)", message)
    return int(found.group(1)) if found else None


# ---- the common fields ----------------------------------------------------------------------------------


def _int_field(table: dict[str, Any], field: str, low: int, high: int) -> int | None:
    value = table.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise DeclarationError(field, f"must be a whole number from {low} to {high}")
    return value


def _timeout(table: dict[str, Any]) -> float | None:
    value = table.get("timeout_s")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_TIMEOUT_S:
        raise DeclarationError("timeout_s", f"must be a number of seconds > 0 and <= {MAX_TIMEOUT_S:g}")
    return float(value)


def build(name: str, table: Any, python_names: set[str]) -> Declared:
    """One `[report_types."name"]` table as a declared type (line unknown yet)."""
    if not NAME.match(name):
        raise DeclarationError("name", "letters, digits, '.', '_' and '-' only, at most 100, not first '.-_'")
    if name in python_names:
        raise DeclarationError(
            "name", "a Python report type has this name (declared types cannot replace it)"
        )
    if not isinstance(table, dict):
        raise DeclarationError("", f'must be a table ([{TOP_TABLE}."{name}"])')
    kind_name = table.get("kind")
    if not isinstance(kind_name, str):
        raise DeclarationError("kind", f"required: one of {', '.join(sorted(KINDS))}")
    kind = KINDS.get(kind_name)
    if kind is None:
        raise DeclarationError("kind", f"unknown kind {kind_name!r} (known: {', '.join(sorted(KINDS))})")
    description = table.get("description", "")
    if not isinstance(description, str):
        raise DeclarationError("description", "must be a string")
    schema = check_schema(table.get("params", NO_PARAMS))
    own = {key: value for key, value in table.items() if key not in COMMON_FIELDS}
    spec = kind.parse(name, own, schema)
    rtype = ReportType(
        name=name,
        description=description.strip(),
        params_model=params_model(name, schema),
        fn=kind.report(spec),
        timeout_s=_timeout(table),
        max_attempts=_int_field(table, "max_attempts", 1, 100),
        priority=_int_field(table, "priority", 0, 9),
        max_concurrency=_int_field(table, "max_concurrency", 1, 100_000),
        kind=kind_name,
    )
    return Declared(rtype=rtype, kind=kind, spec=spec, line=None)


def parse_text(text: str, file: str, python_names: set[str] | None = None) -> list[Declared]:
    """Every type of a file's text, checked without I/O; the first refusal raises, located."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DeclarationError("", f"not valid TOML: {exc}").located(file, _toml_line(str(exc))) from None
    unknown = sorted(set(data) - {TOP_TABLE})
    if unknown:
        reason = f'unknown top-level key {unknown[0]!r} (types go in [{TOP_TABLE}."name"] tables)'
        raise DeclarationError("", reason).located(file, 1)
    types = data.get(TOP_TABLE, {})
    if not isinstance(types, dict):
        raise DeclarationError("", f"{TOP_TABLE} must be a table of tables").located(file, 1)
    taken = registry.python_names() if python_names is None else python_names
    declared = []
    for name, table in types.items():
        try:
            one = build(name, table, taken)
        except DeclarationError as exc:
            raise exc.located(file, locate(text, name, exc.field), name) from None
        declared.append(Declared(one.rtype, one.kind, one.spec, locate(text, name)))
    return declared


async def check(declared: list[Declared], text: str, file: str) -> None:
    """The kinds' checks against the outside world (a SQL type's source plans its query), concurrently;
    the first refusal (in file order) raises, located."""
    checks = [(d, d.kind.check(d.spec)) for d in declared if d.kind.check is not None]
    results = await asyncio.gather(*(c for _, c in checks), return_exceptions=True)
    for (one, _), result in zip(checks, results, strict=True):
        if isinstance(result, DeclarationError):
            name = one.rtype.name
            raise result.located(file, locate(text, name, result.field), name)
        if isinstance(result, BaseException):
            raise result


def read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DeclarationError("", f"cannot read the file: {exc}").located(str(path), None) from None


async def load(path: Path, python_names: set[str] | None = None) -> list[ReportType]:
    """Read, parse and check a report-types file: its types, or DeclarationError (file, line, reason)."""
    text = await asyncio.to_thread(read, path)
    declared = parse_text(text, str(path), python_names)
    await check(declared, text, str(path))
    return [d.rtype for d in declared]
