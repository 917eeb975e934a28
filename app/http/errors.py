"""problem+json (RFC 9457) for every error: domain errors, validation, the router's 404/405, DB outages.

The one place that maps exceptions to HTTP statuses; `problem_responses()` documents them in OpenAPI.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.core.db import is_db_outage
from app.core.errors import Conflict, NotFound, OrchestratorError, RateLimited, Unavailable, ValidationFailed
from app.http.schemas import Problem

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
BODY_PARSE_ERROR = "There was an error parsing the body"

_STATUS: list[tuple[type[OrchestratorError], int]] = [
    (NotFound, 404),
    (Conflict, 409),
    (ValidationFailed, 422),
    (RateLimited, 429),
    (Unavailable, 503),
]


def problem_body(
    status: int,
    detail: str,
    title: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The problem+json document (RFC 9457); `extra` adds members of the problem type (readiness `checks`)."""
    phrase = HTTPStatus(status).phrase
    body: dict[str, Any] = {
        "type": f"/problems/{phrase.lower().replace(' ', '-').replace('/', '-')}",
        "title": title or phrase,
        "status": status,
        "detail": detail,
    }
    if errors is not None:
        body["errors"] = errors
    body.update(extra or {})
    return body


def problem(
    status: int,
    detail: str,
    title: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> JSONResponse:
    """The one problem+json response builder."""
    body = problem_body(status, detail, title, errors, extra)
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def _clean_loc(loc: Any) -> list[str | int]:
    return [p if isinstance(p, int) else str(p) for p in loc]


def field_errors(raw: Sequence[Any]) -> list[dict[str, Any]]:
    """Pydantic's (or FastAPI's) validation errors as the `errors` of a 422: `loc`, `msg`, `type`."""
    return [
        {
            "loc": _clean_loc(e.get("loc", [])),
            "msg": str(e.get("msg", "invalid")),
            "type": str(e.get("type", "value_error")),
        }
        for e in raw
    ]


async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
    errors = field_errors(exc.errors())
    if not errors:
        errors = [{"loc": ["body"], "msg": "invalid request", "type": "value_error"}]
    return problem(422, "The request is invalid; see `errors`.", errors=errors)


async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    if exc.status_code == 400 and exc.detail == BODY_PARSE_ERROR:
        # FastAPI answers 400 for bodies json.loads cannot take (bad UTF-8, deep nesting): malformed JSON.
        errors = [{"loc": ["body"], "msg": "the body is not valid JSON", "type": "json_invalid"}]
        return problem(422, "The request body is not valid JSON.", errors=errors)
    detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
    headers = getattr(exc, "headers", None)
    if exc.status_code == 405:
        # Starlette names only the first route's methods; RFC 9110 wants every method the path allows.
        headers = {**(headers or {}), "Allow": ", ".join(sorted(_allowed_methods(request)))}
    return problem(exc.status_code, detail, headers=headers)


def _allowed_methods(request: Request) -> set[str]:
    methods: set[str] = set()
    scope = {**request.scope, "path": request.scope.get("path", "")}

    def visit(routes: Any) -> None:
        for route in routes:
            nested = getattr(getattr(route, "original_router", None), "routes", None)
            if nested is not None:  # FastAPI's included routers
                visit(nested)
                continue
            match, _ = route.matches(scope)
            if match != Match.NONE:
                methods.update(getattr(route, "methods", None) or ())

    visit(request.app.router.routes)
    return methods


def domain_problem(exc: OrchestratorError, loc_prefix: Sequence[str | int] = ()) -> dict[str, Any]:
    """The problem document of a domain error (a batch item's answer; `_domain` sends it as a response).
    `loc_prefix` goes before the request part in each field error's `loc` (a batch item's index)."""
    status = status_of(exc)
    if status == 500:
        return problem_body(500, exc.detail)
    errors = None
    if isinstance(exc, ValidationFailed):
        errors = [{**e, "loc": [exc.part, *loc_prefix, *e["loc"]]} for e in exc.errors]
    return problem_body(status, exc.detail, title=exc.title, errors=errors)


def status_of(exc: OrchestratorError) -> int:
    return next((status for cls, status in _STATUS if isinstance(exc, cls)), 500)


async def _domain(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, OrchestratorError)
    body = domain_problem(exc)
    headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, RateLimited) else None
    return JSONResponse(body, status_code=body["status"], media_type=PROBLEM_JSON, headers=headers)


async def _db_down(request: Request, exc: Exception) -> JSONResponse:
    if not is_db_outage(exc):
        return await _unexpected(request, exc)  # a schema or SQL bug is not an outage: a logged 500
    log.warning("database unavailable", extra={"error": type(exc).__name__})
    return problem(503, "The database is unreachable; try again shortly.", headers={"Retry-After": "2"})


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error")
    return problem(500, "An unexpected error occurred; it has been logged.")


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http)  # type: ignore[arg-type]
    app.add_exception_handler(OrchestratorError, _domain)
    app.add_exception_handler(OperationalError, _db_down)
    app.add_exception_handler(PoolTimeoutError, _db_down)
    app.add_exception_handler(ConnectionError, _db_down)
    app.add_exception_handler(Exception, _unexpected)


_DESCRIPTIONS = {
    401: "Missing, malformed or revoked API key",
    403: "The key lacks the scope this operation needs",
    404: "No such job for this tenant",
    409: "The state machine forbids this transition",
    413: "Request body over MAX_BODY_BYTES",
    422: "Invalid input; `errors` lists each bad field",
    429: "Submit rate limit reached; see Retry-After",
    503: "MySQL (or Redis) is unreachable",
}


def problem_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {
        code: {
            "model": Problem,
            "description": _DESCRIPTIONS.get(code, HTTPStatus(code).phrase),
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for code in codes
    }
