"""HTTP report types for the tests: a declaration against the fake service, registered straight into the
registry (no declarations file), and the path of a request's callback URLs on our API.

Also a REPORT_MODULES module for real worker processes: `register()` declares `test.http.async` and
`test.http.sync` against TEST_REPORT_SERVICE_URL (and the examples, against the demo service).
"""

from __future__ import annotations

import contextlib
import os
import threading
import tomllib
import urllib.parse
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from app.reports.declared.http import http_report, parse_http_spec
from app.reports.declared.loader import build
from app.reports.registry import ReportRegistry, ReportType, registry
from devtools import demo_report_service
from tests.utils.fakes.report_service import SECRET, ServiceCall


class Region(BaseModel):
    region: str = "north"
    year: int = 2026


def http_type(name: str, url: str, mode: str = "sync", **table: Any) -> ReportType:
    """A declared HTTP type calling `url` (a template over Region's fields), signed with the fake's secret."""
    declared = {"url": url, "mode": mode, "secret": SECRET, **table}
    spec = parse_http_spec(name, declared, Region.model_json_schema())
    return ReportType(
        name=name,
        description=f"HTTP report against {url}",
        params_model=Region,
        fn=http_report(spec),
        timeout_s=table.get("timeout_s"),
        max_attempts=table.get("max_attempts"),
    )


def register_http_type(monkeypatch: pytest.MonkeyPatch, rtype: ReportType) -> ReportType:
    """In this process's registry for one test (the in-process API and burst workers share it)."""
    monkeypatch.setitem(registry._types, rtype.name, rtype)
    return rtype


def callback_path(call: ServiceCall, action: str) -> str:
    """The path (and no host) of one of the request's callback URLs: `heartbeat`, `complete` …"""
    return urllib.parse.urlsplit(call.callback[f"{action}_url"]).path


def register(target: ReportRegistry) -> None:
    """Loaded by REPORT_MODULES: the fake service's types, and the examples when TEST_DEMO_SERVICE_PORT is
    set (the demo service on that port)."""
    if os.environ.get("TEST_DEMO_SERVICE_PORT"):
        for example in example_types(int(os.environ["TEST_DEMO_SERVICE_PORT"])):
            target._types[example.name] = example
    base = os.environ["TEST_REPORT_SERVICE_URL"]
    heartbeat_timeout_s = float(os.environ.get("TEST_HEARTBEAT_TIMEOUT_S", "60"))
    for rtype in (
        http_type(
            "test.http.async", f"{base}/reports/{{region}}", "async", heartbeat_timeout_s=heartbeat_timeout_s
        ),
        http_type("test.http.sync", f"{base}/reports/{{region}}"),
    ):
        target._types[rtype.name] = rtype


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "report-types.toml"


def example_types(port: int) -> list[ReportType]:
    """The example HTTP declarations of examples/report-types.toml, built by the declarations loader, the
    demo service's port replaced."""
    declared = tomllib.loads(EXAMPLES.read_text())["report_types"]
    types = []
    for name, table in declared.items():
        if table.get("kind") != "http":
            continue
        table = {**table, "url": table["url"].replace(":8099/", f":{port}/")}
        types.append(build(name, table, set()).rtype)
    return types


@contextlib.contextmanager
def demo_service() -> Iterator[int]:
    """`make run`'s demo report service (devtools/demo_report_service.py) in a thread on a free port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), demo_report_service.Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
