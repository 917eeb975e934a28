"""A real local OTLP/HTTP trace receiver (what a collector listens on at :4318): it decodes the protobuf
export requests of the processes under test and keeps their spans with each one's service name.
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.utils.fakes.server import FakeServer


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


@dataclass
class OtlpReceiver(FakeServer):
    url_path = ""  # exporters append /v1/traces to OTEL_EXPORTER_OTLP_ENDPOINT
    script: list[str] = field(default_factory=list)
    spans: list[ReceivedSpan] = field(default_factory=list)
    _spans_lock: threading.Lock = field(default_factory=threading.Lock)

    def respond(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, Any] | None]:
        if path != "/v1/traces":
            return 404, None
        if headers.get("content-encoding") == "gzip":
            raw = gzip.decompress(raw)
        request = ExportTraceServiceRequest.FromString(raw)
        received = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            service=str(resource.get("service.name", "")),
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                        )
                    )
        with self._spans_lock:
            self.spans.extend(received)
        return 200, None

    def named(self, name: str, job_id: str | None = None) -> list[ReceivedSpan]:
        with self._spans_lock:
            return [s for s in self.spans if s.name == name and job_id in (None, s.attributes.get("job.id"))]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"
