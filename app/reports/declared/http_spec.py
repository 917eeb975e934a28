"""The declaration of an HTTP report type (`kind = "http"`), checked at load: URL and header templates whose
`{placeholders}` are params of the type, method, signing secret, mode and time limits; and their rendering.

A placeholder may stand in the URL's path and query and in header values, never in its scheme or host (a
param must not choose where we connect); rendered values are URL-encoded in the URL.
"""

from __future__ import annotations

import math
import os
import re
import string
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.reports.declared.errors import DeclarationError

METHODS = ("GET", "POST", "PUT")
MODES = ("sync", "async")
#: Headers we set ourselves (the signature, the body's type and length, the pinned Host).
RESERVED_HEADERS = {
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "x-report-signature",
    "x-report-event",
}
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_PLACEHOLDER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DEFAULT_REQUEST_TIMEOUT_S = 30.0
DEFAULT_HEARTBEAT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class HttpSpec:
    """One HTTP report type as declared (see docs/how-to/http-reports.md)."""

    name: str
    url: str  # the template
    method: str = "POST"
    headers: Mapping[str, str] = field(default_factory=dict)  # name → value template
    secret: str | None = None
    secret_env: str | None = None  # the environment variable holding the secret, read at each call
    mode: str = "sync"
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    heartbeat_timeout_s: float = DEFAULT_HEARTBEAT_TIMEOUT_S
    attempt_ttl_s: float | None = None  # the type's timeout_s, if declared: how long a token may live

    def signing_secret(self) -> str | None:
        if self.secret is not None:
            return self.secret
        value = os.environ.get(self.secret_env or "")
        return value or None


def placeholders(template: str, where: str) -> list[str]:
    """The `{name}` placeholders of a template (`{{` and `}}` are literal braces)."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise DeclarationError(where, f"bad template: {exc}") from None
    names = []
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not _PLACEHOLDER.fullmatch(name) or spec or conversion:
            raise DeclarationError(
                where, f"placeholder {{{name}}} must be a plain param name like {{region}}"
            )
        names.append(name)
    return names


def _known(names: list[str], where: str, properties: Mapping[str, Any]) -> None:
    for name in names:
        if name not in properties:
            raise DeclarationError(where, f"placeholder {{{name}}} is not a property of the params schema")


def _check_url(template: str, properties: Mapping[str, Any]) -> None:
    names = placeholders(template, "url")
    _known(names, "url", properties)
    fixed = template.split("{", 1)[0] if names else template
    parts = urllib.parse.urlsplit(fixed)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DeclarationError("url", "must be an absolute http(s) URL with a fixed host")
    if parts.username or parts.password:
        raise DeclarationError("url", "must not carry credentials (use headers or the signing secret)")
    if names and not (parts.path or parts.query):
        raise DeclarationError("url", "placeholders may stand in the path and query only, not the host")
    if parts.fragment:
        raise DeclarationError("url", "must not have a #fragment")


FIELDS = {
    "url",
    "method",
    "mode",
    "headers",
    "secret",
    "secret_env",
    "request_timeout_s",
    "heartbeat_timeout_s",
}


# The type's own keys: the loader takes them out before a kind parses; direct callers may leave them in.
TYPE_FIELDS = {
    "name",
    "kind",
    "description",
    "params",
    "timeout_s",
    "max_attempts",
    "priority",
    "max_concurrency",
}


def _no_unknown_fields(table: Mapping[str, Any]) -> None:
    """A misspelt field is refused, not ignored (as the `sql` kind does)."""
    unknown = sorted(set(table) - FIELDS - TYPE_FIELDS)
    if unknown:
        raise DeclarationError(
            unknown[0], f"unknown field of kind 'http' (known: {', '.join(sorted(FIELDS))})"
        )


def _seconds(table: Mapping[str, Any], key: str, default: float | None) -> float | None:
    value = table.get(key, default)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise DeclarationError(key, "must be a positive number of seconds")
    return float(value)


def _headers(table: Mapping[str, Any], properties: Mapping[str, Any]) -> dict[str, str]:
    raw = table.get("headers", {})
    if not isinstance(raw, Mapping):
        raise DeclarationError("headers", "must be a table of header name = value")
    headers: dict[str, str] = {}
    for name, value in raw.items():
        where = f"headers.{name}"
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise DeclarationError(where, "is not a valid header name")
        if name.lower() in RESERVED_HEADERS:
            raise DeclarationError(where, "is set by the service itself")
        if not isinstance(value, str) or "\r" in value or "\n" in value:
            raise DeclarationError(where, "must be a one-line string")
        _known(placeholders(value, where), where, properties)
        headers[name] = value
    return headers


def _secret(table: Mapping[str, Any]) -> tuple[str | None, str | None]:
    secret, secret_env = table.get("secret"), table.get("secret_env")
    if (secret is None) == (secret_env is None):
        raise DeclarationError("secret", "give exactly one of `secret` or `secret_env` (the signing secret)")
    if secret is not None and (not isinstance(secret, str) or len(secret) < 16):
        raise DeclarationError("secret", "must be a string of at least 16 characters")
    if secret_env is not None and (not isinstance(secret_env, str) or not _ENV_NAME.fullmatch(secret_env)):
        raise DeclarationError("secret_env", "must name an environment variable")
    return secret, secret_env


def parse_http_spec(name: str, table: dict[str, Any], params_schema: dict[str, Any]) -> HttpSpec:
    """Check the declaration of one `kind = "http"` type; raises DeclarationError(field, reason). Keys of
    the type itself (description, params, timeout_s, …) are the loader's and are ignored here."""
    properties = params_schema.get("properties") or {}
    if not isinstance(properties, Mapping):
        raise DeclarationError("params", "`properties` must be an object")
    _no_unknown_fields(table)
    url = table.get("url")
    if not isinstance(url, str) or not url:
        raise DeclarationError("url", "is required: the URL template of the team's service")
    _check_url(url, properties)
    method = table.get("method", "POST")
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise DeclarationError("method", f"must be one of {', '.join(METHODS)}")
    mode = table.get("mode", "sync")
    if mode not in MODES:
        raise DeclarationError(
            "mode", "must be `sync` (the answer is the file) or `async` (202, then callbacks)"
        )
    if mode == "async" and str(method).upper() == "GET":
        raise DeclarationError(
            "method", "async needs POST or PUT: the attempt's callback token must not travel in a URL (logs)"
        )
    secret, secret_env = _secret(table)
    request_timeout_s = _seconds(table, "request_timeout_s", DEFAULT_REQUEST_TIMEOUT_S)
    heartbeat_timeout_s = _seconds(table, "heartbeat_timeout_s", DEFAULT_HEARTBEAT_TIMEOUT_S)
    assert request_timeout_s is not None and heartbeat_timeout_s is not None
    return HttpSpec(
        name=name,
        url=url,
        method=method.upper(),
        headers=_headers(table, properties),
        secret=secret,
        secret_env=secret_env,
        mode=mode,
        request_timeout_s=request_timeout_s,
        heartbeat_timeout_s=heartbeat_timeout_s,
        attempt_ttl_s=_seconds(table, "timeout_s", None),
    )


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def render_url(template: str, values: Mapping[str, Any]) -> str:
    """The template with each placeholder replaced by its param, URL-encoded (a `/` or `?` in a value stays
    inside its segment). A value of `.` or `..` is refused (ValueError): clients and servers resolve dot
    segments, so it would climb out of its segment to another path of the service."""
    encoded = {k: urllib.parse.quote(_text(values.get(k)), safe="") for k in placeholders(template, "url")}
    climbing = sorted(k for k, v in encoded.items() if v in (".", ".."))
    if climbing:
        raise ValueError(f"param {climbing[0]!r} may not be '.' or '..' (it would change the URL's path)")
    return template.format(**encoded)


def render_header(template: str, values: Mapping[str, Any], where: str) -> str:
    text = template.format(**{k: _text(values.get(k)) for k in placeholders(template, where)})
    if "\r" in text or "\n" in text:
        raise ValueError(f"{where}: a param put a line break in the header")
    return text
