"""Tracing's switch (the OTEL_* environment, off by default), its no-op helpers when off, and traceparents."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from app.core import tracing
from tests.utils.tracing import hex_trace_id, in_memory_tracing, named

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
OTEL_VARIABLES = (
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
)


@pytest.fixture(autouse=True)
def no_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def exporter_types() -> list[type]:
    return [type(e) for e in tracing._exporters_from_env()]


def test_tracing_is_off_without_otel_settings_and_its_helpers_do_nothing() -> None:
    assert tracing.setup_tracing("report-orchestrator-test") is False
    assert not tracing.enabled() and tracing.provider() is None
    with tracing.span("submit", parent=TRACEPARENT, attributes={"job.id": "x"}) as span:
        assert span is None
        assert tracing.current_traceparent() is None
        tracing.annotate(span, {"job.created": True}, error="ignored")


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({}, []),
        ({"OTEL_TRACES_EXPORTER": "none"}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, [OTLPSpanExporter]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, [OTLPSpanExporter]),
        ({"OTEL_TRACES_EXPORTER": "console"}, [ConsoleSpanExporter]),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, [OTLPSpanExporter, ConsoleSpanExporter]),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, []),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, []),
    ],
)
def test_the_otel_environment_chooses_the_exporters(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], expected: list[type]
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert exporter_types() == expected


def test_a_traceparent_gives_its_trace_id_and_a_malformed_one_none() -> None:
    assert tracing.trace_id_of(TRACEPARENT) == "4bf92f3577b34da6a3ce929d0e0e4736"
    for bad in (
        None,
        "",
        "garbage",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # all-zero span id
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # forbidden version
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
    ):
        assert tracing.trace_id_of(bad) is None, bad


def test_a_span_under_a_stored_traceparent_joins_its_trace_and_links_others() -> None:
    other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with in_memory_tracing() as exporter:
        with tracing.span("attempt", parent=TRACEPARENT, links=[other, None, "garbage"]) as span:
            assert span is not None
            current = tracing.current_traceparent()
            tracing.annotate(span, {"attempt.outcome": "failed", "skipped": None}, error="RuntimeError: boom")
        with tracing.span("submit") as root:
            assert root is not None
    assert tracing.trace_id_of(current) == tracing.trace_id_of(TRACEPARENT)
    [attempt] = named(exporter, "attempt")
    assert hex_trace_id(attempt) == tracing.trace_id_of(TRACEPARENT)
    assert attempt.parent is not None and format(attempt.parent.span_id, "016x") == "00f067aa0ba902b7"
    assert [format(link.context.trace_id, "032x") for link in attempt.links] == [tracing.trace_id_of(other)]
    assert dict(attempt.attributes or {}) == {"attempt.outcome": "failed"}
    assert attempt.status.description == "RuntimeError: boom"
    [submit] = named(exporter, "submit")
    assert submit.parent is None and hex_trace_id(submit) != hex_trace_id(attempt)
    assert not tracing.enabled()


def test_the_service_name_is_the_process_s_unless_otel_service_name_says_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert tracing._resource("report-orchestrator-worker").attributes["service.name"] == (
        "report-orchestrator-worker"
    )
    monkeypatch.setenv("OTEL_SERVICE_NAME", "reports-eu")
    assert tracing._resource("report-orchestrator-worker").attributes["service.name"] == "reports-eu"
