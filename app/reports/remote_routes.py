"""`/v1/attempt-callbacks/{token}/…`: where the service running an asynchronous HTTP report reports back,
authenticated by the attempt token alone (no API key): heartbeat, progress, the file, a failure.

Thin: the token and every state check are the service's (app.reports.remote); a refusal is problem+json,
with `"cancel": true` when the service should stop working on the attempt.
"""

from __future__ import annotations

import logging
import re
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Request
from fastapi.responses import JSONResponse

from app.http.errors import problem, problem_responses
from app.http.token_paths import ATTEMPT_CALLBACKS_PREFIX
from app.reports import remote
from app.reports.remote_schemas import CallbackAnswer, FailIn, HeartbeatIn, ProgressIn, ResultAccepted

router = APIRouter(prefix=ATTEMPT_CALLBACKS_PREFIX, tags=["attempt callbacks"])

Token = Annotated[
    str, Path(min_length=1, max_length=1000, description="The attempt token from the request we sent")
]
_REFUSALS = {
    403: "The token is not one we signed (changed, truncated, or signed with another secret)",
    404: "The token's job no longer exists",
    409: "The outcome of this attempt was already reported",
    410: "The token expired, or its attempt ended (lost, timed out, cancelled, finished): stop working",
    413: "The uploaded file exceeds ATTEMPT_UPLOAD_MAX_BYTES",
    422: "Invalid body or query",
    503: "MySQL (or the output store) is unreachable; try again",
}


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    docs = problem_responses(*codes)
    return {code: {**doc, "description": _REFUSALS[int(code)]} for code, doc in docs.items()}


def _refused(exc: remote.AttemptCallbackRefused) -> JSONResponse:
    return problem(exc.status, exc.detail, extra={"cancel": True} if exc.cancel else None)


@router.post(
    "/{token}/heartbeat",
    response_model=CallbackAnswer,
    responses=_responses(403, 404, 409, 410, 422, 503),
    summary="The service is still working on the attempt (answers whether to cancel)",
)
async def attempt_heartbeat(
    token: Token, body: Annotated[HeartbeatIn | None, Body()] = None
) -> CallbackAnswer | JSONResponse:
    """Keeps the attempt alive (silence longer than the type's `heartbeat_timeout_s` fails it, retryable);
    `{"cancel": true}` means a cancel of the job was asked: stop."""
    try:
        cancel = await remote.heartbeat(token, body.progress if body else None)
    except remote.AttemptCallbackRefused as exc:
        return _refused(exc)
    return CallbackAnswer(cancel=cancel)


@router.post(
    "/{token}/progress",
    response_model=CallbackAnswer,
    responses=_responses(403, 404, 409, 410, 422, 503),
    summary="How far the attempt got (a heartbeat too)",
)
async def attempt_progress(token: Token, body: ProgressIn) -> CallbackAnswer | JSONResponse:
    try:
        cancel = await remote.heartbeat(token, body.progress)
    except remote.AttemptCallbackRefused as exc:
        return _refused(exc)
    return CallbackAnswer(cancel=cancel)


@router.post(
    "/{token}/complete",
    status_code=202,
    response_model=ResultAccepted,
    responses=_responses(403, 404, 409, 410, 413, 422, 503),
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "The report file itself (raw bytes); its `Content-Type` is the file's",
            "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
    summary="Upload the report file: the attempt succeeded",
)
async def attempt_complete(
    request: Request,
    token: Token,
    filename: Annotated[
        str, Query(min_length=1, max_length=255, description="The file's name (sanitised as ours are)")
    ],
    rows: Annotated[int | None, Query(ge=0, description="Data rows in the file (0: an empty report)")] = None,
) -> ResultAccepted | JSONResponse:
    """The body is the file, streamed to the output store (at most ATTEMPT_UPLOAD_MAX_BYTES). Once taken,
    the worker holding the attempt finishes the job `done` with it."""
    content_type = (request.headers.get("content-type") or "application/octet-stream").strip()
    upload = remote.Upload(filename=filename, content_type=content_type, rows=rows)
    try:
        await remote.complete(token, request.stream(), upload)
    except remote.AttemptCallbackRefused as exc:
        return _refused(exc)
    return ResultAccepted()


@router.post(
    "/{token}/fail",
    status_code=202,
    response_model=ResultAccepted,
    responses=_responses(403, 404, 409, 410, 422, 503),
    summary="The attempt failed: retry it (`retryable`) or send the job to dead",
)
async def attempt_fail(token: Token, body: FailIn) -> ResultAccepted | JSONResponse:
    try:
        await remote.fail(token, body.message, body.retryable)
    except remote.AttemptCallbackRefused as exc:
        return _refused(exc)
    return ResultAccepted()


_TOKEN_IN_PATH = re.compile(r"(/v1/attempt-callbacks/)[^/\s\"?]+")


class TokenRedaction(logging.Filter):
    """Keeps attempt tokens out of the access log (uvicorn logs each request's path)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(
            isinstance(a, str) and ATTEMPT_CALLBACKS_PREFIX in a for a in record.args
        ):
            record.args = tuple(
                _TOKEN_IN_PATH.sub(r"\1***", a) if isinstance(a, str) else a for a in record.args
            )
        return True


def install_log_redaction() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, TokenRedaction) for f in access.filters):
        access.addFilter(TokenRedaction())
