"""The console's HTTP kit: templates, the signed-in viewer, CSRF checks, flash messages, HTML error pages
and the security headers (a strict CSP: scripts and styles only from /ui/static, no inline script).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.auth.service import Principal
from app.console import service
from app.console.session import (
    FLASH_COOKIE,
    SESSION_COOKIE,
    ConsoleSession,
    Flash,
    read_flash,
    read_session,
    sign_flash,
    tokens_match,
)
from app.core.config import get_settings
from app.core.errors import Conflict, NotFound, OrchestratorError, Unavailable, ValidationFailed

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
templates.env.globals["inf"] = math.inf

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    b"content-security-policy": CSP.encode(),
    b"x-content-type-options": b"nosniff",
    b"x-frame-options": b"DENY",
    b"referrer-policy": b"same-origin",
    b"cache-control": b"no-store",
}


class SignInRequired(Exception):
    pass


class ConsoleProblem(Exception):
    """Shown as a readable HTML page (or flashed, for actions) instead of problem+json."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Viewer:
    principal: Principal
    session: ConsoleSession

    @property
    def can_write(self) -> bool:
        return self.principal.has("jobs:write")

    @property
    def is_admin(self) -> bool:
        return self.principal.is_admin


async def current_viewer(request: Request) -> Viewer:
    session = read_session(request.cookies.get(SESSION_COOKIE))
    if session is None:
        raise SignInRequired()
    principal = await service.principal_of(session.key_id)
    if principal is None:  # revoked since sign-in
        raise SignInRequired()
    return Viewer(principal, session)


ViewerDep = Annotated[Viewer, Depends(current_viewer)]


async def form_of(request: Request) -> dict[str, Any]:
    """The form, as single values (and lists for repeated names such as `ids`)."""
    form = await request.form()
    out: dict[str, Any] = {}
    for name in form:
        values = form.getlist(name)
        out[name] = values if len(values) > 1 or name == "ids" else values[0]
    return out


async def checked_form(request: Request, viewer: Viewer, scope_needed: str = "jobs:write") -> dict[str, Any]:
    """A POST's form after the CSRF token and the scope are checked (403 page otherwise)."""
    form = await form_of(request)
    if not tokens_match(viewer.session.csrf, form.get("csrf")):
        raise ConsoleProblem(
            403, "The form's security token is missing or stale. Reload the page and try again."
        )
    if not viewer.principal.has(scope_needed):
        raise ConsoleProblem(403, f"This key lacks the `{scope_needed}` scope.")
    return form


@contextlib.contextmanager
def readable_errors() -> Iterator[None]:
    """The services' errors as console problems with their own readable message."""
    try:
        yield
    except NotFound as exc:
        raise ConsoleProblem(404, exc.detail) from exc
    except Conflict as exc:
        raise ConsoleProblem(409, exc.detail) from exc
    except ValidationFailed as exc:
        fields = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', []))}: {e.get('msg')}" for e in exc.errors
        )
        raise ConsoleProblem(422, f"{exc.detail} {fields}".strip()) from exc
    except Unavailable as exc:  # the object store (or MySQL) did not answer
        raise ConsoleProblem(503, exc.detail) from exc
    except OrchestratorError as exc:
        raise ConsoleProblem(400, exc.detail) from exc


def back_to(url: str, flash: Flash | None = None) -> RedirectResponse:
    """303 back to a console page, carrying a one-shot message."""
    response = RedirectResponse(url, status_code=303)
    if flash is not None:
        response.set_cookie(
            FLASH_COOKIE, sign_flash(flash), max_age=60, httponly=True, samesite="strict", path="/ui"
        )
    return response


def safe_next(target: str | None) -> str:
    """Only console paths: never an open redirect."""
    if target and target.startswith("/ui") and not target.startswith("//") and "\\" not in target:
        return target
    return "/ui"


def render(
    request: Request, template: str, viewer: Viewer | None, status_code: int = 200, **context: Any
) -> HTMLResponse:
    flash = read_flash(request.cookies.get(FLASH_COOKIE))
    response = templates.TemplateResponse(
        request,
        template,
        {
            "viewer": viewer,
            "csrf": viewer.session.csrf if viewer else context.pop("csrf", ""),
            "flash": flash,
            "refresh_s": get_settings().console_refresh_s,
            "now": datetime.now(UTC),
            "path": request.url.path,
            **context,
        },
        status_code=status_code,
    )
    if flash is not None:
        response.delete_cookie(FLASH_COOKIE, path="/ui")
    return response


class SecurityHeaders:
    """Adds the console's headers (CSP and friends) to every /ui response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith("/ui"):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in SECURITY_HEADERS.items() if k not in present]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, with_headers)


def install(app: FastAPI) -> None:
    """Static files, the HTML error pages and the security headers of the console."""
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="console-static")

    async def sign_in_required(request: Request, _: Exception) -> Response:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        if request.method != "GET":
            target = "/ui"
        return RedirectResponse(f"/ui/login?next={quote(target)}", status_code=303)

    async def console_problem(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ConsoleProblem)
        viewer = None
        with contextlib.suppress(SignInRequired):
            viewer = await current_viewer(request)
        return render(
            request, "error.html", viewer, status_code=exc.status, status=exc.status, message=exc.message
        )

    async def no_such_page(rest: str) -> Response:
        raise ConsoleProblem(404, "There is no such console page.")

    # Last of the /ui routes (install runs after the routers are included): HTML, not the API's problem+json.
    app.add_api_route("/ui/{rest:path}", no_such_page, methods=["GET", "POST"], include_in_schema=False)
    app.add_exception_handler(SignInRequired, sign_in_required)
    app.add_exception_handler(ConsoleProblem, console_problem)
    app.add_middleware(SecurityHeaders)
