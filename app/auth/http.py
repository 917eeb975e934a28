"""Auth's HTTP side: the API-key middleware (401, then 403 for a missing scope, before FastAPI parses
anything) and `PrincipalDep`, the authenticated principal every route takes.
"""

from __future__ import annotations

import re
import time
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import ASGIApp, Receive, Scope, Send

from app.auth.service import Principal, authenticate, hash_key
from app.core.config import get_settings
from app.core.db import is_db_outage
from app.http.asgi import route_path, send_problem
from app.http.token_paths import token_authenticated

ADMIN_PATHS = re.compile(
    r"^/v1/(dead-letters/replay|workers|tenants(/[^/]*(/(pause|resume))?)?|fair-share/.*"
    r"|report-types/[^/]+(/(pause|resume|policy))?)/?$"
)


def required_scope(method: str, path: str) -> str:
    if ADMIN_PATHS.match(path):
        return "admin"
    return "jobs:read" if method in ("GET", "HEAD", "OPTIONS") else "jobs:write"


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
        if (not path.startswith("/v1/") and path != "/v1") or token_authenticated(path):
            await self.app(scope, receive, send)
            return
        raw = _bearer(scope)
        if raw is None:
            await send_problem(
                scope, send, 401, "Send `Authorization: Bearer <api key>`.", {"WWW-Authenticate": "Bearer"}
            )
            return
        try:
            principal = await self.cache.lookup(raw)
        except Exception as exc:
            if not is_db_outage(exc):
                raise
            await send_problem(
                scope, send, 503, "The database is unreachable; try again shortly.", {"Retry-After": "2"}
            )
            return
        if principal is None:
            await send_problem(
                scope, send, 401, "The API key is unknown or revoked.", {"WWW-Authenticate": "Bearer"}
            )
            return
        scope_needed = required_scope(scope["method"], path)
        if not principal.has(scope_needed):
            await send_problem(scope, send, 403, f"This key lacks the `{scope_needed}` scope.")
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


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


# ---- the principal as a route dependency ---------------------------------------------------------------

bearer_scheme = HTTPBearer(auto_error=False, description="API key: `Authorization: Bearer ro_…`")


async def get_principal(
    request: Request, _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)]
) -> Principal:
    principal: Principal = request.state.principal
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]
