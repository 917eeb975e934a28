"""/v1/schedules: create, list, read, patch, delete, pause, resume and trigger recurring reports, and list
what each fire did. Thin: the wire shape in, one service call, the wire shape out.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from app.auth.http import PrincipalDep
from app.core.errors import NotFound
from app.http.errors import problem_responses
from app.http.pagination import ULID_RE, Cursor, Limit, decode_cursor, decode_number_cursor, next_cursor
from app.http.responses import model_response
from app.models import Schedule
from app.schedules import service
from app.schedules.repository import ScheduleFilter
from app.schedules.schemas import (
    RunPage,
    RunPublic,
    ScheduleCreate,
    SchedulePage,
    SchedulePatch,
    SchedulePublic,
)

router = APIRouter(prefix="/v1/schedules", tags=["schedules"])

ScheduleId = Annotated[str, Path(description="Schedule id (ULID)")]


def _checked_id(schedule_id: str) -> str:
    """A malformed id names no schedule: 404 without a lookup."""
    if not ULID_RE.match(schedule_id):
        raise NotFound(f"No schedule {schedule_id[:40]!r}.")
    return schedule_id


def _public(row: Schedule) -> SchedulePublic:
    return SchedulePublic.of(row, service.next_fires(row))


def _answer(row: Schedule, status_code: int = 200) -> Response:
    return model_response(_public(row), status_code, headers={"Location": f"/v1/schedules/{row.id}"})


@router.post(
    "",
    status_code=201,
    response_model=SchedulePublic,
    responses=problem_responses(401, 403, 409, 413, 422, 503),
    summary="Create a recurring report schedule",
)
async def create_schedule(body: ScheduleCreate, principal: PrincipalDep) -> Response:
    return _answer(await service.create(principal.tenant, body), 201)


@router.get(
    "", response_model=SchedulePage, responses=problem_responses(401, 403, 422, 503), summary="List schedules"
)
async def list_schedules(
    principal: PrincipalDep,
    report_type: Annotated[str | None, Query(max_length=100)] = None,
    paused: Annotated[bool | None, Query()] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Response:
    flt = ScheduleFilter(scope=principal.tenant_scope, report_type=report_type, paused=paused)
    rows = await service.list_schedules(flt, decode_cursor(cursor), limit + 1)
    page = SchedulePage(
        items=[_public(r) for r in rows[:limit]], next_cursor=next_cursor([r.id for r in rows], limit)
    )
    return model_response(page)


@router.get(
    "/{schedule_id}",
    response_model=SchedulePublic,
    responses=problem_responses(401, 403, 404, 503),
    summary="Get a schedule with its next fire times",
)
async def get_schedule(schedule_id: ScheduleId, principal: PrincipalDep) -> Response:
    return model_response(_public(await service.get(_checked_id(schedule_id), principal.tenant_scope)))


@router.patch(
    "/{schedule_id}",
    response_model=SchedulePublic,
    responses=problem_responses(401, 403, 404, 409, 413, 422, 503),
    summary="Change a schedule (its next fires are computed again)",
)
async def patch_schedule(schedule_id: ScheduleId, body: SchedulePatch, principal: PrincipalDep) -> Response:
    """Fields left out keep their value; `null` clears an optional one; setting `cron` or `interval_s` alone
    switches the schedule to it."""
    row = await service.patch(_checked_id(schedule_id), principal.tenant_scope, body)
    return model_response(_public(row))


@router.delete(
    "/{schedule_id}",
    status_code=204,
    responses=problem_responses(401, 403, 404, 503),
    summary="Delete a schedule (the jobs it made stay)",
)
async def delete_schedule(schedule_id: ScheduleId, principal: PrincipalDep) -> Response:
    await service.delete(_checked_id(schedule_id), principal.tenant_scope)
    return Response(status_code=204)


@router.post(
    "/{schedule_id}/pause",
    response_model=SchedulePublic,
    responses=problem_responses(401, 403, 404, 503),
    summary="Pause a schedule: nothing fires or is recorded until it is resumed",
)
async def pause_schedule(schedule_id: ScheduleId, principal: PrincipalDep) -> Response:
    return model_response(_public(await service.pause(_checked_id(schedule_id), principal.tenant_scope)))


@router.post(
    "/{schedule_id}/resume",
    response_model=SchedulePublic,
    responses=problem_responses(401, 403, 404, 503),
    summary="Resume a schedule at its next future fire (no catch-up of the paused period)",
)
async def resume_schedule(schedule_id: ScheduleId, principal: PrincipalDep) -> Response:
    return model_response(_public(await service.resume(_checked_id(schedule_id), principal.tenant_scope)))


@router.post(
    "/{schedule_id}/trigger",
    status_code=202,
    response_model=RunPublic,
    responses=problem_responses(401, 403, 404, 409, 503),
    summary="Run a schedule once now (recorded as a manual run)",
)
async def trigger_schedule(schedule_id: ScheduleId, principal: PrincipalDep) -> Response:
    row, run = await service.trigger(_checked_id(schedule_id), principal.tenant_scope)
    headers = {"Location": f"/v1/jobs/{run.job_id}"} if run.job_id else None
    return model_response(RunPublic.of(run, row.timezone), 202, headers=headers)


@router.get(
    "/{schedule_id}/runs",
    response_model=RunPage,
    responses=problem_responses(401, 403, 404, 422, 503),
    summary="What each fire of a schedule did, newest first",
)
async def list_schedule_runs(
    schedule_id: ScheduleId, principal: PrincipalDep, limit: Limit = 50, cursor: Cursor = None
) -> Response:
    before = decode_number_cursor(cursor)
    row, runs = await service.list_runs(_checked_id(schedule_id), principal.tenant_scope, before, limit + 1)
    page = RunPage(
        items=[RunPublic.of(r, row.timezone) for r in runs[:limit]],
        next_cursor=next_cursor([str(r.id) for r in runs], limit),
    )
    return model_response(page)
