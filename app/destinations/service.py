"""Destinations: create, list, read, replace (secrets left out are kept), delete, and resolve a job's or a
schedule's `deliver_to` (names or ids of the tenant's own destinations) before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.exc import IntegrityError

from app.core.config import get_settings
from app.core.db import session_scope
from app.core.errors import Conflict, NotFound, ValidationFailed
from app.core.ids import new_id
from app.core.tenancy import TenantScope
from app.core.times import utcnow
from app.destinations.digest_repository import DigestRepository
from app.destinations.repository import DestinationRepository
from app.destinations.schemas import SECRET_FIELDS, DeliverTo, DestinationBody, EmailBody, NotifyRouteCreate
from app.http.ssrf import CallbackRefused, check_host, check_url
from app.models import Destination, NotifyRoute


def split(body: DestinationBody) -> tuple[dict[str, Any], dict[str, Any]]:
    """The body's shown options and its secrets (name and kind are columns of their own)."""
    values = body.model_dump(exclude={"name", "kind"})
    secret_names = SECRET_FIELDS[body.kind]
    options = {k: v for k, v in values.items() if k not in secret_names}
    secrets = {k: v for k, v in values.items() if k in secret_names and v is not None}
    return options, secrets


async def _check_reachable(body: DestinationBody, secrets: dict[str, Any]) -> None:
    """An HTTP destination's URL, or a mail server, must pass the SSRF guard now (URLs again at each send)."""
    url = secrets.get("url") or getattr(body, "url", None)
    field = "url" if url else "host"
    try:
        if url:
            await check_url(str(url), get_settings(), what="destination")
        elif isinstance(body, EmailBody):
            await check_host(body.host, body.port, get_settings(), what="mail server")
    except CallbackRefused as exc:
        error = {"loc": [field], "msg": str(exc), "type": field}
        raise ValidationFailed(f"The destination's {field} is not acceptable.", [error]) from exc


async def create(tenant: str, body: DestinationBody) -> Destination:
    options, secrets = split(body)
    await _check_reachable(body, secrets)
    now = utcnow()
    row = Destination(
        id=new_id(),
        tenant=tenant,
        name=body.name,
        kind=body.kind,
        options=options,
        secrets=secrets,
        created_at=now,
        updated_at=now,
    )
    try:
        async with session_scope() as session:
            await DestinationRepository(session).add(row)
            await DigestRepository(session).add_slot(row.id)
    except IntegrityError as exc:
        raise Conflict(f"Tenant {tenant!r} already has a destination named {body.name!r}.") from exc
    return row


async def get(destination_id: str, scope: TenantScope) -> Destination:
    async with session_scope() as session:
        row = await DestinationRepository(session).get(destination_id, scope)
    if row is None:
        raise NotFound(f"No destination {destination_id!r}.")
    return row


async def list_destinations(scope: TenantScope, after_id: str | None, limit: int) -> list[Destination]:
    async with session_scope() as session:
        return await DestinationRepository(session).page(scope, after_id, limit)


async def replace(destination_id: str, scope: TenantScope, body: DestinationBody) -> Destination:
    """A new body for a destination of the same kind; a secret the body leaves out keeps its stored value
    (so a client that never saw a secret can edit the rest)."""
    current = await get(destination_id, scope)
    if body.kind != current.kind:
        raise Conflict(f"Destination {destination_id} is a {current.kind}; make a new one for a {body.kind}.")
    options, secrets = split(body)
    secrets = {**current.secrets, **secrets}
    await _check_reachable(body, secrets)
    values = {"name": body.name, "options": options, "secrets": secrets, "updated_at": utcnow()}
    try:
        async with session_scope() as session:
            await DestinationRepository(session).replace(current, values)
    except IntegrityError as exc:
        raise Conflict(f"Tenant {current.tenant!r} already has a destination named {body.name!r}.") from exc
    return await get(destination_id, scope)


async def delete(destination_id: str, scope: TenantScope) -> None:
    """Delete a destination. Deliveries already staged for it fail on their next try ("destination
    deleted"); jobs and schedules naming it deliver to the others."""
    await get(destination_id, scope)
    async with session_scope() as session:
        await DestinationRepository(session).remove(destination_id)


async def resolve_deliver_to(
    tenant: str, items: Sequence[DeliverTo], loc: str = "deliver_to"
) -> list[dict[str, Any]] | None:
    """The stored form of `deliver_to`: each item with its destination's id, checked to be the tenant's own
    (an unknown name, or another tenant's id, is a 422 naming it: nothing is written)."""
    if not items:
        return None
    async with session_scope() as session:
        found = await DestinationRepository(session).named(tenant, [i.destination for i in items])
    by_ref = {d.id: d for d in found} | {d.name: d for d in found}
    errors = [
        {"loc": [loc, n, "destination"], "msg": f"no destination {item.destination!r}", "type": "destination"}
        for n, item in enumerate(items)
        if item.destination not in by_ref
    ]
    if errors:
        raise ValidationFailed("deliver_to names a destination this tenant does not have.", errors)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for item in items:
        target = by_ref[item.destination]
        if target.id in seen:
            continue  # one delivery a destination
        seen.add(target.id)
        extra = item.model_dump(exclude={"destination"}, exclude_defaults=True)
        if extra.get("recipients") and target.kind != "email":
            raise ValidationFailed(
                "Extra recipients are for email destinations.",
                [{"loc": [loc], "msg": f"{target.name!r} is a {target.kind}", "type": "recipients"}],
            )
        out.append({"destination_id": target.id, **extra})
    return out


async def resolve_refs(tenant: str, refs: Sequence[str], loc: str) -> list[str] | None:
    """Names or ids of the tenant's own destinations as their ids (a 422 naming any other)."""
    resolved = await resolve_deliver_to(tenant, [DeliverTo(destination=ref) for ref in refs], loc)
    return [item["destination_id"] for item in resolved] if resolved else None


async def create_route(tenant: str, body: NotifyRouteCreate) -> NotifyRoute:
    ids = await resolve_refs(tenant, body.notify_to, "notify_to") or []
    row = NotifyRoute(
        id=new_id(), tenant=tenant, report_type=body.report_type, events=sorted(set(body.events)),
        destination_ids=ids, created_at=utcnow(),
    )  # fmt: skip
    async with session_scope() as session:
        await DestinationRepository(session).add_route(row)
    return row


async def list_routes(scope: TenantScope) -> list[NotifyRoute]:
    async with session_scope() as session:
        return await DestinationRepository(session).routes(scope)


async def delete_route(route_id: str, scope: TenantScope) -> None:
    async with session_scope() as session:
        if await DestinationRepository(session).remove_route(route_id, scope) != 1:
            raise NotFound(f"No notify route {route_id!r}.")
