"""Fixtures of the security tests: test-only report types registered in the process-wide registry for one
test and forgotten after it (the output-name and error-body tests submit them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from app.reports.registry import registry


@pytest.fixture
def report_type() -> Iterator[Any]:
    """Register test-only report types in the process-wide registry (the app and drain() workers share it)."""
    added: list[str] = []

    def register(name: str, params: type[BaseModel], fn: Any) -> None:
        registry.report_type(name, params=params)(fn)
        added.append(name)

    yield register
    for name in added:
        registry._types.pop(name, None)
