"""The declaration of an HTTP report type: what load refuses (with the field and the reason) and how a
URL template is filled (values URL-encoded, never steering the host)."""

from __future__ import annotations

from typing import Any

import pytest

from app.reports.declared.errors import DeclarationError
from app.reports.declared.http import parse_http_spec
from app.reports.declared.http_spec import render_header, render_url

SCHEMA = {"type": "object", "properties": {"region": {"type": "string"}, "year": {"type": "integer"}}}
SECRET = "0123456789abcdef-secret"


def declare(**table: Any) -> Any:
    return parse_http_spec(
        "sales.http", {"url": "https://reports.internal/sales/{region}", "secret": SECRET, **table}, SCHEMA
    )


def refused(**table: Any) -> DeclarationError:
    with pytest.raises(DeclarationError) as caught:
        declare(**table)
    return caught.value


def test_a_declaration_with_defaults_is_a_signed_sync_post() -> None:
    spec = declare()
    assert (spec.method, spec.mode, spec.request_timeout_s, spec.signing_secret()) == (
        "POST",
        "sync",
        30.0,
        SECRET,
    )


def test_a_placeholder_not_in_the_params_schema_is_refused_with_the_field() -> None:
    error = refused(url="https://reports.internal/sales/{country}")
    assert error.field == "url" and "{country}" in error.reason and "params schema" in error.reason


def test_a_placeholder_in_the_host_is_refused() -> None:
    assert refused(url="https://{region}.reports.internal/sales").field == "url"
    assert refused(url="https://reports.internal:{year}/sales").field == "url"


def test_a_header_placeholder_must_be_a_param_too() -> None:
    error = refused(headers={"X-Region": "{country}"})
    assert error.field == "headers.X-Region"


def test_reserved_headers_and_bad_names_are_refused() -> None:
    assert refused(headers={"X-Report-Signature": "x"}).field == "headers.X-Report-Signature"
    assert refused(headers={"Bad Name": "x"}).field == "headers.Bad Name"


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"method": "DELETE"}, "method"),
        ({"mode": "later"}, "mode"),
        ({"request_timeout_s": 0}, "request_timeout_s"),
        ({"heartbeat_timeout_s": "soon"}, "heartbeat_timeout_s"),
        ({"secret_env": "REPORT_SECRET"}, "secret"),  # both given
        ({"secret": "short"}, "secret"),
        ({"url": "ftp://reports.internal/x"}, "url"),
        ({"url": "https://user:pw@reports.internal/x"}, "url"),
    ],
)
def test_bad_fields_are_refused_by_name(table: dict[str, Any], field: str) -> None:
    assert refused(**table).field == field


def test_a_secret_may_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = parse_http_spec("x", {"url": "https://reports.internal/x", "secret_env": "SALES_SECRET"}, SCHEMA)
    assert spec.signing_secret() is None
    monkeypatch.setenv("SALES_SECRET", "from-the-environment")
    assert spec.signing_secret() == "from-the-environment"


def test_values_are_url_encoded_inside_their_segment() -> None:
    url = render_url(
        "https://reports.internal/sales/{region}?year={year}", {"region": "a/b?c=d&e", "year": 2026}
    )
    assert url == "https://reports.internal/sales/a%2Fb%3Fc%3Dd%26e?year=2026"


def test_a_param_cannot_put_a_line_break_in_a_header() -> None:
    assert render_header("r={region}", {"region": "north"}, "h") == "r=north"
    with pytest.raises(ValueError, match="line break"):
        render_header("r={region}", {"region": "north\r\nX-Evil: 1"}, "h")
