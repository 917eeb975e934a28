"""Tracing in-process for tests: the app's own setup with an in-memory exporter; reading its spans back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.core import tracing


@contextmanager
def in_memory_tracing() -> Iterator[InMemorySpanExporter]:
    """Tracing on through `setup_tracing`'s processor seam, every span exported at once; off again after."""
    exporter = InMemorySpanExporter()
    assert tracing.setup_tracing("report-orchestrator-test", SimpleSpanProcessor(exporter))
    try:
        yield exporter
    finally:
        tracing.shutdown_tracing()


def hex_trace_id(span: ReadableSpan) -> str:
    assert span.context is not None
    return format(span.context.trace_id, "032x")


def named(exporter: InMemorySpanExporter, name: str, job_id: str | None = None) -> list[ReadableSpan]:
    """Finished spans called `name` (of one job when given), in the order they started."""
    spans = [
        s
        for s in exporter.get_finished_spans()
        if s.name == name and (job_id is None or (s.attributes or {}).get("job.id") == job_id)
    ]
    return sorted(spans, key=lambda s: s.start_time or 0)


def in_trace(exporter: InMemorySpanExporter, trace_id: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if hex_trace_id(s) == trace_id]
