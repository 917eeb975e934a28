"""OpenTelemetry tracing of every process, off unless the OTEL_* environment asks: setup, and the helpers the
domains use to put a span in a job's trace (stored as a W3C traceparent on its row and in its queue message).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from importlib.metadata import entry_points
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Link, Span, SpanContext, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger(__name__)

TRACER_NAME = "report-orchestrator"
TRACEPARENT = "traceparent"
# version-traceid-spanid-flags (W3C Trace Context); an all-zero trace or span id is invalid.
_TRACEPARENT_RE = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
# Off, `span()` hands out this one reusable null context: the hot path pays a global read and a `with`.
_NO_SPAN: AbstractContextManager[None] = contextlib.nullcontext()
_PROPAGATOR = TraceContextTextMapPropagator()

_provider: TracerProvider | None = None
_tracer: trace.Tracer | None = None


# ---- setup ---------------------------------------------------------------------------------------------


def _exporters_from_env() -> list[SpanExporter]:
    """The exporters OTEL_TRACES_EXPORTER names (otlp, console, none, or any installed entry point); with it
    unset, OTLP when an OTLP endpoint is configured, else none: tracing stays off unless asked for."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not names:
        endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        names = "otlp" if endpoint else "none"
    exporters: list[SpanExporter] = []
    for name in (n.strip() for n in names.split(",")):
        if name in ("", "none"):
            continue
        if name in ("otlp", "otlp_proto_http"):
            exporters.append(_otlp_exporter())
        elif name == "console":
            exporters.append(ConsoleSpanExporter())
        else:
            found = entry_points(group="opentelemetry_traces_exporter", name=name)
            if not found:
                log.warning("unknown OTEL_TRACES_EXPORTER entry ignored", extra={"exporter": name})
                continue
            exporters.append(next(iter(found)).load()())
    return exporters


def _otlp_exporter() -> SpanExporter:
    # Imported here: only a process that exports over OTLP pays for protobuf.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    if protocol.strip() != "http/protobuf":
        log.warning("only OTLP over http/protobuf is installed; using it", extra={"protocol": protocol})
    # Endpoint, headers, timeout and compression come from the OTEL_EXPORTER_OTLP_* variables.
    return OTLPSpanExporter()


def _resource(service_name: str) -> Resource:
    """OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME as the SDK reads them; `service_name` only if unset."""
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service_name}))
    return resource


def setup_tracing(service_name: str, span_processor: SpanProcessor | None = None) -> bool:
    """Turn tracing on for this process if the environment asks for it; True when it is on.

    Call it at process start, before the database engine is created (the engine is instrumented as it is
    built). `span_processor` is the tests' seam: it turns tracing on with that processor instead of the
    environment's exporters (an in-memory exporter), without touching the global tracer provider.
    A second call while tracing is on changes nothing.
    """
    global _provider, _tracer
    if _provider is not None:
        return True
    if span_processor is not None:
        processors: list[SpanProcessor] = [span_processor]
    else:
        processors = [BatchSpanProcessor(exporter) for exporter in _exporters_from_env()]
    if not processors:
        return False
    # The sampler comes from OTEL_TRACES_SAMPLER / _ARG (parent-based, always on by default).
    provider = TracerProvider(resource=_resource(service_name))
    for processor in processors:
        provider.add_span_processor(processor)
    if span_processor is None and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        # Report modules and other libraries that use the global API get the same provider.
        trace.set_tracer_provider(provider)
    _provider, _tracer = provider, provider.get_tracer(TRACER_NAME)
    HTTPXClientInstrumentor().instrument(tracer_provider=provider)
    return True


def shutdown_tracing() -> None:
    """Flush and stop: export what is buffered, remove the instrumentation, turn the helpers off."""
    global _provider, _tracer
    provider, _provider, _tracer = _provider, None, None
    if provider is None:
        return
    for instrumentor in (HTTPXClientInstrumentor(), SQLAlchemyInstrumentor()):
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
    provider.shutdown()


def enabled() -> bool:
    return _tracer is not None


def provider() -> TracerProvider | None:
    """The process's provider (for instrumentations that take one), or None when tracing is off."""
    return _provider


def instrument_engine(sync_engine: Any) -> None:
    """Trace the statements of the process's (one) engine; nothing when tracing is off.

    The instrumentor is a singleton that instruments once: a new engine (tests rebuild theirs) replaces the
    previous one's listeners."""
    if _provider is None:
        return
    instrumentor = SQLAlchemyInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    # The contrib release in reach declares SQLAlchemy < 2.1; its event hooks (before/after_cursor_execute)
    # are unchanged in 2.1, which tests/integration/core/test_tracing.py checks.
    instrumentor.instrument(engine=sync_engine, tracer_provider=_provider, skip_dep_check=True)


# ---- helpers -------------------------------------------------------------------------------------------


def trace_id_of(traceparent: str | None) -> str | None:
    """The 32-hex trace id of a W3C traceparent, or None if there is none or it is malformed."""
    if not traceparent:
        return None
    match = _TRACEPARENT_RE.match(traceparent)
    if match is None or match.group(1) == "ff":
        return None
    trace_id, span_id = match.group(2), match.group(3)
    if trace_id == "0" * 32 or span_id == "0" * 16:
        return None
    return trace_id


def span_context_of(traceparent: str | None) -> SpanContext | None:
    """The (remote) span context a stored traceparent names, or None."""
    if trace_id_of(traceparent) is None:
        return None
    assert traceparent is not None
    context = trace.get_current_span(_PROPAGATOR.extract({TRACEPARENT: traceparent})).get_span_context()
    return context if context.is_valid else None


def current_traceparent() -> str | None:
    """The W3C traceparent of the current span, to store or carry; None when tracing is off or no span."""
    if _tracer is None:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get(TRACEPARENT)


def span(
    name: str,
    *,
    parent: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    links: Iterable[str | None] = (),
    start_time_ns: int | None = None,
) -> AbstractContextManager[Span | None]:
    """A span made current for the block (None inside when tracing is off).

    `parent`: a stored traceparent whose trace the span joins (else the current span is the parent; a
    malformed one starts a new trace);
    `links`: traceparents of related traces (a request that caused this, the other letters of a digest).
    An exception leaving the block is recorded and marks the span as an error.
    """
    tracer = _tracer
    if tracer is None:
        return _NO_SPAN
    context = _PROPAGATOR.extract({TRACEPARENT: parent}) if parent else None
    span_links = [Link(c) for c in (span_context_of(tp) for tp in links) if c is not None]
    return tracer.start_as_current_span(
        name,
        context=context,
        attributes=_clean(attributes) if attributes else None,
        links=span_links,
        start_time=start_time_ns,
    )


def annotate(span: Span | None, attributes: Mapping[str, Any], error: str | None = None) -> None:
    """Add attributes (None values skipped) and, with `error`, mark the span failed; no-op without a span."""
    if span is None:
        return
    span.set_attributes(_clean(attributes))
    if error is not None:
        span.set_status(Status(StatusCode.ERROR, error))


def rename(span: Span | None, name: str) -> None:
    if span is not None:
        span.update_name(name)


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None}
