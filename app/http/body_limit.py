"""The request body cap as pure ASGI middleware: 413 by Content-Length up front, else while streaming,
before FastAPI parses anything (so the order stays 401, 403, 413, then 422).
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.config import get_settings
from app.http.asgi import route_path, send_problem
from app.http.token_paths import is_upload


class BodyTooLarge(HTTPException):
    """An HTTPException so FastAPI's body reader re-raises it unchanged and it renders as a 413 problem."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The request body exceeds {limit} bytes.")


#: A batch carries up to 1,000 jobs: its body may be this many times MAX_BODY_BYTES (4 MiB by default);
#: each of its items is still held to MAX_BODY_BYTES on its own (a 422 for that item).
BATCH_BODY_FACTOR = 64
BATCH_PATH = "/v1/jobs/batch"


def body_limit(path: str) -> int:
    """The largest body accepted on `path`, in bytes."""
    if is_upload(path):
        return get_settings().attempt_upload_max_bytes
    limit = get_settings().max_body_bytes
    return limit * BATCH_BODY_FACTOR if path.rstrip("/") == BATCH_PATH else limit


class BodyLimitMiddleware:
    """Refuses bodies over MAX_BODY_BYTES (a batch: BATCH_BODY_FACTOR times that) with 413: by
    Content-Length up front, else while streaming."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = body_limit(route_path(scope))
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await send_problem(scope, send, 400, "Bad Content-Length header.")
                    return
                if declared > limit:
                    await send_problem(scope, send, 413, f"The request body exceeds {limit} bytes.")
                    return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await send_problem(scope, send, 413, f"The request body exceeds {limit} bytes.")
