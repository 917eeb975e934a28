"""The API's side of tracing: a server span per request from OTel's FastAPI instrumentation, under which the
services' spans (`submit`, `replay`) and the SQL statements nest; an incoming `traceparent` is continued.
"""

from __future__ import annotations

import os

from fastapi import FastAPI
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

from app.core import tracing

# Probes and scrapes would be most of the traces; OTEL_PYTHON_FASTAPI_EXCLUDED_URLS overrides this.
DEFAULT_EXCLUDED_URLS = "/healthz,/readyz,/metrics"


def instrument(app: FastAPI) -> None:
    """Set tracing up for the API process (from the OTEL_* environment) and trace `app`'s requests."""
    if not tracing.setup_tracing("report-orchestrator-api"):
        return
    excluded = None
    if not (
        os.environ.get("OTEL_PYTHON_FASTAPI_EXCLUDED_URLS") or os.environ.get("OTEL_PYTHON_EXCLUDED_URLS")
    ):
        excluded = DEFAULT_EXCLUDED_URLS
    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=tracing.provider(),
        excluded_urls=excluded,
        # The ASGI receive/send sub-spans double a trace's size and say nothing a server span doesn't.
        exclude_spans=["receive", "send"],
    )
