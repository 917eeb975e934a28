"""Report types: the registry, the context a report runs with, and the built-in demo types.

A report is an async function `fn(ctx, params)` registered with `@registry.report_type(...)`.
"""

from app.reports.base import OutputInfo, PermanentError, ReportContext
from app.reports.registry import ReportType, Step, registry

__all__ = ["OutputInfo", "PermanentError", "ReportContext", "ReportType", "Step", "registry"]
