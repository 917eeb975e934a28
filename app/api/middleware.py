"""Pure ASGI middleware: API-key authentication and scope checks, and the request body cap.

Running before FastAPI parses anything gives the contract's order: 401, then 403, then 413, then 422.
"""

from __future__ import annotations

import re
import time

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import problem
from app.auth.service import Principal, authenticate, hash_key
from app.core.config import get_settings
from app.core.db import is_db_outage

ADMIN_PATHS = re.compile(
    r"^/v1/(dead-letters/replay|workers|tenants(/[^/]*(/(pause|resume))?)?|fair-share/.*"
    r"|report-types/[^/]+(/(pause|resume|policy))?)/?$"
)


def required_scope(method: str, path: str) -> str:
    if ADMIN_PATHS.match(path):
        return "admin"
    return "jobs:read" if method in ("GET", "HEAD", "OPTIONS") else "jobs:write"


async def _send_problem(
    scope: Scope, send: Send, status: int, detail: str, headers: dict[str, str] | None = None
) -> None:
    """The problem+json answer of `app.api.errors.problem`, sent from outside the router."""
    await problem(status, detail, headers=headers)(scope, _no_receive, send)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


class KeyCache:
    """Caches key lookups for API_KEY_CACHE_TTL_S so a revoked key is refused within that many seconds."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[float, Principal | None]] = {}

    async def lookup(self, raw_key: str) -> Principal | None:
        ttl_s = get_settings().api_key_cache_ttl_s
        now = time.monotonic()
        digest = hash_key(raw_key)
        hit = self._entries.get(digest)
        if hit is not None and hit[0] > now:
            return hit[1]
        principal = await authenticate(raw_key)
        if ttl_s > 0:
            if len(self._entries) > 10_000:
                self._entries.clear()
            self._entries[digest] = (now + ttl_s, principal)
        return principal


class AuthMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.cache = KeyCache()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = route_path(scope) if scope["type"] == "http" else ""
        if not path.startswith("/v1/") and path != "/v1":
            await self.app(scope, receive, send)
            return
        raw = _bearer(scope)
        if raw is None:
            await _send_problem(
                scope, send, 401, "Send `Authorization: Bearer <api key>`.", {"WWW-Authenticate": "Bearer"}
            )
            return
        try:
            principal = await self.cache.lookup(raw)
        except Exception as exc:
            if not is_db_outage(exc):
                raise
            await _send_problem(
                scope, send, 503, "The database is unreachable; try again shortly.", {"Retry-After": "2"}
            )
            return
        if principal is None:
            await _send_problem(
                scope, send, 401, "The API key is unknown or revoked.", {"WWW-Authenticate": "Bearer"}
            )
            return
        scope_needed = required_scope(scope["method"], path)
        if not principal.has(scope_needed):
            await _send_problem(scope, send, 403, f"This key lacks the `{scope_needed}` scope.")
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


def route_path(scope: Scope) -> str:
    """The path the router matches: behind `--root-path`, scope["path"] still carries the prefix."""
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root) :] or "/"
    return path


def _bearer(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            try:
                text = value.decode("latin-1")
            except UnicodeDecodeError:
                return None
            kind, _, token = text.partition(" ")
            token = token.strip()
            if kind.lower() != "bearer" or not token or len(token) > 200:
                return None
            return token
    return None


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
                    await _send_problem(scope, send, 400, "Bad Content-Length header.")
                    return
                if declared > limit:
                    await _send_problem(scope, send, 413, f"The request body exceeds {limit} bytes.")
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
                await _send_problem(scope, send, 413, f"The request body exceeds {limit} bytes.")
