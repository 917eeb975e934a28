"""Plain ASGI helpers for middleware that answers before FastAPI routes a request: a problem+json answer
sent from outside the router, and the path the router matches.
"""

from __future__ import annotations

from starlette.types import Message, Scope, Send

from app.http.errors import problem


async def send_problem(
    scope: Scope, send: Send, status: int, detail: str, headers: dict[str, str] | None = None
) -> None:
    """The problem+json answer of `app.http.errors.problem`, sent from outside the router."""
    await problem(status, detail, headers=headers)(scope, no_receive, send)


async def no_receive() -> Message:
    return {"type": "http.disconnect"}


def route_path(scope: Scope) -> str:
    """The path the router matches: behind `--root-path`, scope["path"] still carries the prefix."""
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root) :] or "/"
    return path
