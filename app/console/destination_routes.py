"""Console pages of destinations under /ui: the tenant's robots, mail servers and webhooks (never a secret),
a form a kind to add one, delete; and a job's deliveries with a resend, on the job page's behalf.

Every action goes through the services the API calls (`/v1/destinations`, a job's deliveries), in the
viewer's tenants, with the same refusals shown as readable pages (404, 409, 422).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import TypeAdapter, ValidationError

from app.console.job_routes import check_id
from app.console.session import Flash
from app.console.web import ViewerDep, back_to, checked_form, readable_errors, render
from app.core.errors import ValidationFailed
from app.destinations import delivery, service
from app.destinations.schemas import DestinationBody, DestinationPublic

router = APIRouter(prefix="/ui", include_in_schema=False)

BODY = TypeAdapter(DestinationBody)
PAGE_SIZE = 200
LISTS = ("at_mobiles", "mentioned_mobiles", "recipients")  # comma- or line-separated in the form
FLAGS = ("at_all", "mention_all")


def body_of(form: dict[str, Any]) -> dict[str, Any]:
    """The API body a destination form means: blanks left out, lists split, check boxes as booleans."""
    body: dict[str, Any] = {}
    for name, raw in form.items():
        if name == "csrf" or not isinstance(raw, str):
            continue
        value = raw.strip()
        if name in LISTS:
            body[name] = [v.strip() for v in value.replace("\n", ",").split(",") if v.strip()]
        elif name in FLAGS:
            body[name] = value == "on"
        elif value:
            body[name] = value
    return body


@router.get("/destinations", response_class=HTMLResponse)
async def destinations_page(request: Request, viewer: ViewerDep) -> Response:
    rows = await service.list_destinations(viewer.principal.tenant_scope, None, PAGE_SIZE)
    items = [DestinationPublic.of(r) for r in rows]
    return render(request, "destinations.html", viewer, page="destinations", destinations=items)


@router.post("/destinations")
async def create_destination(request: Request, viewer: ViewerDep) -> Response:
    form = await checked_form(request, viewer)
    with readable_errors():
        try:
            body = BODY.validate_python(body_of(form))
        except ValidationError as exc:
            errors = [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors(include_url=False)]
            raise ValidationFailed("The destination is invalid.", errors) from exc
        row = await service.create(viewer.principal.tenant, body)
    return back_to("/ui/destinations", Flash("ok", f"Destination {row.name} ({row.kind}) added."))


@router.post("/destinations/{destination_id}/delete")
async def delete_destination(request: Request, viewer: ViewerDep, destination_id: str) -> Response:
    await checked_form(request, viewer)
    check_id(destination_id, "destination")
    with readable_errors():
        await service.delete(destination_id, viewer.principal.tenant_scope)
    return back_to("/ui/destinations", Flash("ok", "Destination deleted."))


@router.post("/jobs/{job_id}/deliveries/{delivery_id}/resend")
async def resend_delivery(request: Request, viewer: ViewerDep, job_id: str, delivery_id: str) -> Response:
    await checked_form(request, viewer)
    check_id(job_id, "job")
    check_id(delivery_id, "delivery")
    with readable_errors():
        row = await delivery.resend(job_id, delivery_id, viewer.principal.tenant_scope)
    text = f"Delivery to {row.destination_name} sent again (pending until the destination answers)."
    return back_to(f"/ui/jobs/{job_id}", Flash("ok", text))
