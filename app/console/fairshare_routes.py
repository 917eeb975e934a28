"""The console's Fair share page (admin): tenants' and report types' weights, caps, pauses and running jobs,
with Pause / Resume; and `waiting_text`, a job's `waiting_for` in words for the job page.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.console.session import Flash
from app.console.web import ConsoleProblem, Viewer, ViewerDep, back_to, checked_form, readable_errors, render
from app.core.tenancy import TENANT_RE
from app.fairshare import service as fairshare

router = APIRouter(prefix="/ui", include_in_schema=False)

KINDS = {"report_type": "report type", "tenant": "tenant"}


def waiting_text(waiting_for: dict[str, Any] | None) -> str | None:
    """`{"paused": "report_type:demo.csv"}` → "Waiting: report type demo.csv is paused; …" (None: nothing)."""
    if not waiting_for:
        return None
    reason = "paused" if "paused" in waiting_for else "cap"
    kind, _, name = str(waiting_for.get(reason, "")).partition(":")
    what = f"{KINDS.get(kind, kind)} {name}"
    if reason == "paused":
        return f"Waiting: {what} is paused; it starts once that is resumed."
    limit = waiting_for.get("limit")
    return f"Waiting: {limit} of {limit} running for {what}; it starts as soon as one of them finishes."


def _admin(viewer: Viewer) -> None:
    if not viewer.is_admin:
        raise ConsoleProblem(403, "The Fair share page needs an admin key.")


@router.get("/fair-share", response_class=HTMLResponse)
async def fair_share_page(request: Request, viewer: ViewerDep) -> Response:
    _admin(viewer)
    tenants, types = await fairshare.list_tenants(), await fairshare.list_types()
    return render(request, "fair_share.html", viewer, page="fair-share", tenants=tenants, types=types)


@router.post("/fair-share/types/{name}/{action}")
async def pause_or_resume_type(request: Request, viewer: ViewerDep, name: str, action: str) -> Response:
    await checked_form(request, viewer, scope_needed="admin")
    paused = _paused(action)
    with readable_errors():
        await fairshare.set_type(name, {"paused": paused})
    text = f"Report type {name} {'paused: none of its jobs starts' if paused else 'resumed'}."
    return back_to("/ui/fair-share", Flash("ok", text))


@router.post("/fair-share/tenants/{tenant}/{action}")
async def pause_or_resume_tenant(request: Request, viewer: ViewerDep, tenant: str, action: str) -> Response:
    await checked_form(request, viewer, scope_needed="admin")
    paused = _paused(action)
    if not TENANT_RE.fullmatch(tenant):
        raise ConsoleProblem(422, "Not a tenant name (1-64 of a-z 0-9 . _ : -).")
    await fairshare.set_tenant(tenant, {"paused": paused})
    text = f"Tenant {tenant} {'paused: none of its jobs starts' if paused else 'resumed'}."
    return back_to("/ui/fair-share", Flash("ok", text))


def _paused(action: str) -> bool:
    if action not in ("pause", "resume"):
        raise ConsoleProblem(404, "No such action.")
    return action == "pause"
