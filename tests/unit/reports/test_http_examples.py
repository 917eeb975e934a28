"""The example HTTP report types `make run` demonstrates (examples/report-types.toml) are valid
declarations: one sync, one async, both signed with the demo service's secret from the environment."""

from __future__ import annotations

from tests.utils.http_reports import example_types


def test_every_example_http_declaration_parses() -> None:
    types = {t.name: t for t in example_types(8099)}
    assert set(types) == {"demo.http.sales", "demo.http.sales_async"}
    assert all(t.fn is not None and t.max_attempts == 3 for t in types.values())
