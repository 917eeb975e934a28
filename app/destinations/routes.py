"""/v1/destinations: a tenant's robots, mail servers and webhooks (create, list, read, replace, delete), and
/v1/jobs/{id}/deliveries: where a finished report went, with a resend. Secrets are never in an answer.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path
from fastapi.responses import Response

from app.auth.http import PrincipalDep
from app.core.errors import NotFound
from app.destinations import delivery, service
from app.destinations.schemas import (
    DeliveryList,
    DeliveryPublic,
    DestinationBody,
    DestinationPage,
    DestinationPublic,
    NotifyRouteCreate,
    NotifyRouteList,
    NotifyRoutePublic,
)
from app.http.errors import problem_responses
from app.http.pagination import ULID_RE, Cursor, Limit, decode_cursor, next_cursor
from app.http.responses import model_response
from app.models import Destination

router = APIRouter(tags=["destinations"])

DestinationId = Annotated[str, Path(description="Destination id (ULID)")]
JobId = Annotated[str, Path(description="Job id (ULID)")]
DeliveryId = Annotated[str, Path(description="Delivery id (ULID)")]
NewDestination = Annotated[DestinationBody, Body(discriminator="kind")]


def _checked(value: str, what: str) -> str:
    """A malformed id names nothing: 404 without a lookup."""
    if not ULID_RE.match(value):
        raise NotFound(f"No {what} {value[:40]!r}.")
    return value


def _answer(row: Destination, status_code: int = 200) -> Response:
    location = {"Location": f"/v1/destinations/{row.id}"}
    return model_response(DestinationPublic.of(row), status_code, headers=location)


@router.post(
    "/v1/destinations",
    status_code=201,
    response_model=DestinationPublic,
    responses=problem_responses(401, 403, 409, 413, 422, 503),
    summary="Create a destination (DingTalk, Feishu, WeCom, email or webhook) of the key's tenant",
)
async def create_destination(body: NewDestination, principal: PrincipalDep) -> Response:
    return _answer(await service.create(principal.tenant, body), 201)


@router.get(
    "/v1/destinations",
    response_model=DestinationPage,
    responses=problem_responses(401, 403, 422, 503),
    summary="List destinations",
)
async def list_destinations(principal: PrincipalDep, limit: Limit = 50, cursor: Cursor = None) -> Response:
    rows = await service.list_destinations(principal.tenant_scope, decode_cursor(cursor), limit + 1)
    items = [DestinationPublic.of(r) for r in rows[:limit]]
    return model_response(DestinationPage(items=items, next_cursor=next_cursor([r.id for r in rows], limit)))


@router.get(
    "/v1/destinations/{destination_id}",
    response_model=DestinationPublic,
    responses=problem_responses(401, 403, 404, 503),
    summary="Get a destination (its secrets are never returned)",
)
async def get_destination(destination_id: DestinationId, principal: PrincipalDep) -> Response:
    row = await service.get(_checked(destination_id, "destination"), principal.tenant_scope)
    return _answer(row)


@router.put(
    "/v1/destinations/{destination_id}",
    response_model=DestinationPublic,
    responses=problem_responses(401, 403, 404, 409, 413, 422, 503),
    summary="Replace a destination's settings (a secret left out keeps its value)",
)
async def replace_destination(
    destination_id: DestinationId, body: NewDestination, principal: PrincipalDep
) -> Response:
    row = await service.replace(_checked(destination_id, "destination"), principal.tenant_scope, body)
    return _answer(row)


@router.delete(
    "/v1/destinations/{destination_id}",
    status_code=204,
    responses=problem_responses(401, 403, 404, 503),
    summary="Delete a destination (deliveries not yet sent to it fail; jobs keep their other destinations)",
)
async def delete_destination(destination_id: DestinationId, principal: PrincipalDep) -> Response:
    await service.delete(_checked(destination_id, "destination"), principal.tenant_scope)
    return Response(status_code=204)


@router.get(
    "/v1/jobs/{job_id}/deliveries",
    response_model=DeliveryList,
    responses=problem_responses(401, 403, 404, 503),
    summary="Where a finished report went: one delivery a destination a run, with tries and errors",
)
async def job_deliveries(job_id: JobId, principal: PrincipalDep) -> Response:
    rows = await delivery.job_deliveries(_checked(job_id, "job"), principal.tenant_scope)
    return model_response(DeliveryList(items=[DeliveryPublic.of(r) for r in rows]))


@router.post(
    "/v1/jobs/{job_id}/deliveries/{delivery_id}/resend",
    status_code=202,
    response_model=DeliveryPublic,
    responses=problem_responses(401, 403, 404, 503),
    summary="Send a delivery again (sent, failed or skipped ones; a pending one is already on its way)",
)
async def resend_delivery(job_id: JobId, delivery_id: DeliveryId, principal: PrincipalDep) -> Response:
    row = await delivery.resend(
        _checked(job_id, "job"), _checked(delivery_id, "delivery"), principal.tenant_scope
    )
    return model_response(DeliveryPublic.of(row), 202)


@router.post(
    "/v1/notify-routes",
    status_code=201,
    response_model=NotifyRoutePublic,
    responses=problem_responses(401, 403, 413, 422, 503),
    summary="Tell destinations when the tenant's jobs (of a type, or all) die or run slow",
)
async def create_route(body: NotifyRouteCreate, principal: PrincipalDep) -> Response:
    row = await service.create_route(principal.tenant, body)
    return model_response(NotifyRoutePublic.of(row), 201)


@router.get(
    "/v1/notify-routes",
    response_model=NotifyRouteList,
    responses=problem_responses(401, 403, 503),
    summary="List the tenant's notify routes",
)
async def list_routes(principal: PrincipalDep) -> Response:
    rows = await service.list_routes(principal.tenant_scope)
    return model_response(NotifyRouteList(items=[NotifyRoutePublic.of(r) for r in rows]))


@router.delete(
    "/v1/notify-routes/{route_id}",
    status_code=204,
    responses=problem_responses(401, 403, 404, 503),
    summary="Delete a notify route",
)
async def delete_route(route_id: Annotated[str, Path()], principal: PrincipalDep) -> Response:
    await service.delete_route(_checked(route_id, "notify route"), principal.tenant_scope)
    return Response(status_code=204)
