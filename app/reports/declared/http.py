"""`kind = "http"`: a report type served by the team's own service. `parse_http_spec` checks a declaration,
`http_report` turns it into the report function the registry runs (app.reports.declared.http_calls).

See docs/how-to/http-reports.md for the request we send, its signature and the asynchronous protocol.
"""

from __future__ import annotations

from typing import Any

from app.reports.base import ReportContext
from app.reports.declared.http_calls import HttpReportError, run_http_report
from app.reports.declared.http_spec import HttpSpec, parse_http_spec
from app.reports.registry import ReportFn

__all__ = ["HttpReportError", "HttpSpec", "http_report", "parse_http_spec"]


def http_report(spec: HttpSpec) -> ReportFn:
    """The report function of one declared HTTP type."""

    async def report(ctx: ReportContext, params: Any) -> None:
        await run_http_report(spec, ctx, params)

    report.__doc__ = f"HTTP report {spec.name} ({spec.mode}): {spec.method} {spec.url}"
    return report
