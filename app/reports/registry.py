"""The registry of report types: name → async function, params model, timeout and retry budget.

Demo types load when ENABLE_DEMO_REPORTS is on; REPORT_MODULES names extra modules that register types;
REPORT_TYPES_FILE's declared types (app/reports/declared) are swapped in as one set by `replace_declared`.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from app.reports.base import ReportContext

ReportFn = Callable[[ReportContext, Any], Awaitable[None]]


@dataclass(frozen=True)
class Step:
    """One step of a multi-step report. `auto` steps retry with the job; a `manual` step (charging money,
    say) runs automatically at most once and, if it fails, waits for an operator's replay."""

    name: str
    mode: str
    fn: ReportFn

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "manual"):
            raise ValueError(f"step {self.name!r}: mode must be 'auto' or 'manual'")


@dataclass(frozen=True)
class ReportType:
    name: str
    description: str
    params_model: type[BaseModel]
    fn: ReportFn | None
    timeout_s: float | None = None
    max_attempts: int | None = None
    steps: tuple[Step, ...] = ()
    priority: int | None = None  # a job's priority when its submit names none (else 5)
    max_concurrency: int | None = None  # running jobs of this type across every worker (None: no cap)
    kind: str = "python"  # a declared type's kind (`sql`, …): it came from REPORT_TYPES_FILE

    def __post_init__(self) -> None:
        if self.priority is not None and not 0 <= self.priority <= 9:
            raise ValueError(f"{self.name}: priority must be 0-9")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError(f"{self.name}: max_concurrency must be >= 1")

    def params_schema(self) -> dict[str, Any]:
        return self.params_model.model_json_schema()


class ReportRegistry:
    def __init__(self) -> None:
        self._types: dict[str, ReportType] = {}
        self._loaded_modules: set[str] = set()
        self._declared: frozenset[str] = frozenset()  # the names REPORT_TYPES_FILE put here

    def report_type(
        self,
        name: str,
        *,
        params: type[BaseModel],
        description: str = "",
        timeout_s: float | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        max_concurrency: int | None = None,
    ) -> Callable[[ReportFn], ReportFn]:
        def decorator(fn: ReportFn) -> ReportFn:
            self._declared -= {name}  # a Python type of that name takes the place of a declared one
            self._types[name] = ReportType(
                name=name,
                description=description or (fn.__doc__ or "").strip().split("\n")[0],
                params_model=params,
                fn=fn,
                timeout_s=timeout_s,
                max_attempts=max_attempts,
                priority=priority,
                max_concurrency=max_concurrency,
            )
            return fn

        return decorator

    def stepped_report_type(
        self,
        name: str,
        *,
        params: type[BaseModel],
        steps: list[Step],
        description: str = "",
        timeout_s: float | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        max_concurrency: int | None = None,
    ) -> ReportType:
        """Register a report made of ordered steps; each step's outcome is stored and never repeated."""
        if not steps or len({s.name for s in steps}) != len(steps):
            raise ValueError(f"{name}: steps must be non-empty with unique names")
        rtype = ReportType(
            name=name,
            description=description,
            params_model=params,
            fn=None,
            timeout_s=timeout_s,
            max_attempts=max_attempts,
            steps=tuple(steps),
            priority=priority,
            max_concurrency=max_concurrency,
        )
        self._declared -= {name}
        self._types[name] = rtype
        return rtype

    def get(self, name: str) -> ReportType | None:
        return self._types.get(name)

    def all(self) -> list[ReportType]:
        return sorted(self._types.values(), key=lambda t: t.name)

    def python_names(self) -> set[str]:
        """The names registered in Python (a declared type may not take one)."""
        return set(self._types) - self._declared

    def declared(self) -> list[ReportType]:
        return sorted((self._types[n] for n in self._declared), key=lambda t: t.name)

    def replace_declared(self, types: Sequence[ReportType]) -> None:
        """Swap the declared set for `types` in one step (no reader sees half of it): names gone from the
        file go, new ones come, changed ones are replaced. Refuses (ValueError) a name a Python type has."""
        taken = sorted({t.name for t in types} & self.python_names())
        if taken:
            raise ValueError(f"declared names taken by Python report types: {', '.join(taken)}")
        merged = {name: t for name, t in self._types.items() if name not in self._declared}
        merged.update((t.name, t) for t in types)
        self._types, self._declared = merged, frozenset(t.name for t in types)

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
