"""`python -m app.reports.declared check FILE` (also `reportctl types check FILE`): load a report-types file
as the processes would, without changing anything; print `file:line: reason` and fail on a refusal.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.core.config import get_settings
from app.reports.declared import loader
from app.reports.declared.errors import DeclarationError
from app.reports.registry import registry


def check_file(path: Path) -> tuple[int, str]:
    """(exit status, what to print): 0 and the types it declares, or 1 and where and why it is refused.
    The Python types REPORT_MODULES and ENABLE_DEMO_REPORTS name are loaded first (no name may shadow
    them); SQL types are planned by their data sources (DATA_SOURCES) when those answer."""
    settings = get_settings()
    registry.load(settings.enable_demo_reports, settings.report_modules)
    try:
        types = asyncio.run(loader.load(path))
    except DeclarationError as exc:
        if exc.file is None:
            exc.located(str(path), None)
        return 1, str(exc)
    names = ", ".join(f"{t.name} ({t.kind})" for t in types) or "none"
    return 0, f"{path}: ok, {len(types)} report type{'s' if len(types) != 1 else ''}: {names}"
