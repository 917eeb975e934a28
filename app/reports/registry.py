"""The registry of report types: name → async function, params model, timeout and retry budget.

Demo types load when ENABLE_DEMO_REPORTS is on; REPORT_MODULES names extra modules that register types.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from app.reports.base import ReportContext

ReportFn = Callable[[ReportContext, Any], Awaitable[None]]


@dataclass(frozen=True)
class ReportType:
    name: str
    description: str
    params_model: type[BaseModel]
    fn: ReportFn
    timeout_s: float | None = None
    max_attempts: int | None = None

    def params_schema(self) -> dict[str, Any]:
        return self.params_model.model_json_schema()


class ReportRegistry:
    def __init__(self) -> None:
        self._types: dict[str, ReportType] = {}
        self._loaded_modules: set[str] = set()

    def report_type(
        self,
        name: str,
        *,
        params: type[BaseModel],
        description: str = "",
        timeout_s: float | None = None,
        max_attempts: int | None = None,
    ) -> Callable[[ReportFn], ReportFn]:
        def decorator(fn: ReportFn) -> ReportFn:
            self._types[name] = ReportType(
                name=name,
                description=description or (fn.__doc__ or "").strip().split("\n")[0],
                params_model=params,
                fn=fn,
                timeout_s=timeout_s,
                max_attempts=max_attempts,
            )
            return fn

        return decorator

    def get(self, name: str) -> ReportType | None:
        return self._types.get(name)

    def all(self) -> list[ReportType]:
        return sorted(self._types.values(), key=lambda t: t.name)

    def load(self, enable_demo: bool, modules: list[str] | None = None) -> None:
        """Import the modules that register report types (idempotent)."""
        wanted = (["app.reports.demo"] if enable_demo else []) + list(modules or [])
        for module in wanted:
            if module in self._loaded_modules:
                continue
            mod = importlib.import_module(module)
            register = getattr(mod, "register", None)
            if callable(register):
                register(self)
            self._loaded_modules.add(module)


registry = ReportRegistry()
