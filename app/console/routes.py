"""Console pages under /ui: sign-in and out, Overview, Workers and Alerts (jobs and dead letters live in
app/console/job_routes.py). Every page re-renders in place every CONSOLE_REFRESH_S (static/console.js).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.console import service
from app.console.session import (
    LOGIN_CSRF_COOKIE,
    SESSION_COOKIE,
    Flash,
    new_token,
    open_session,
    tokens_match,
)
from app.console.web import ViewerDep, back_to, checked_form, form_of, render, safe_next
from app.core.config import get_settings

router = APIRouter(prefix="/ui", include_in_schema=False)


def _cookie_flags() -> dict[str, object]:
    production = get_settings().env.lower() == "production"
    return {"httponly": True, "samesite": "strict", "secure": production, "path": "/ui"}


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request, next: str | None = None) -> Response:
    token = request.cookies.get(LOGIN_CSRF_COOKIE) or new_token()
    response = render(request, "login.html", None, csrf=token, next=safe_next(next))
    response.set_cookie(LOGIN_CSRF_COOKIE, token, max_age=3600, **_cookie_flags())  # type: ignore[arg-type]
    return response


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    form = await form_of(request)
    target = safe_next(form.get("next"))
    if not tokens_match(request.cookies.get(LOGIN_CSRF_COOKIE), form.get("csrf")):
        return render(
            request, "login.html", None, status_code=403, csrf=new_token(), next=target,
            error="The form's security token is missing or stale. Reload the page and sign in again.",
        )  # fmt: skip
    principal = await service.sign_in(str(form.get("api_key", "")))
    if principal is None:
        token = request.cookies.get(LOGIN_CSRF_COOKIE) or new_token()
        return render(
            request, "login.html", None, status_code=401, csrf=token, next=target,
            error="That API key is unknown or revoked.",
        )  # fmt: skip
    _, cookie = open_session(principal.key_id)
    response = RedirectResponse(target, status_code=303)
    ttl_s = int(get_settings().console_session_ttl_s)
    response.set_cookie(SESSION_COOKIE, cookie, max_age=ttl_s, **_cookie_flags())  # type: ignore[arg-type]
    response.delete_cookie(LOGIN_CSRF_COOKIE, path="/ui")
    return response


@router.post("/logout")
async def logout(request: Request, viewer: ViewerDep) -> Response:
    await checked_form(request, viewer, scope_needed="jobs:read")
    response = back_to("/ui/login", Flash("ok", "Signed out."))
    response.delete_cookie(SESSION_COOKIE, path="/ui")
    return response


@router.get("", response_class=HTMLResponse)
@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def overview(request: Request, viewer: ViewerDep) -> Response:
    data = await service.overview(viewer.principal.tenant_scope)
    peak = max([done + dead for _, done, dead in data.throughput] + [1])
    return render(request, "overview.html", viewer, page="overview", data=data, peak=peak)


@router.get("/workers", response_class=HTMLResponse)
async def workers(request: Request, viewer: ViewerDep) -> Response:
    processes, running = await service.workers(viewer.principal.tenant_scope)
    return render(request, "workers.html", viewer, page="workers", processes=processes, running=running)


@router.get("/alerts", response_class=HTMLResponse)
async def alerts(request: Request, viewer: ViewerDep) -> Response:
    sinks, deliveries, failing = await service.alerts(viewer.principal.tenant_scope)
    return render(
        request, "alerts.html", viewer, page="alerts", sinks=sinks, deliveries=deliveries, failing=failing
    )
