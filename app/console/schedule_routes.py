"""Console pages of schedules under /ui: the filtered list (next fire in the schedule's zone and in UTC) and
one schedule (every field, its next 5 fires, its run records newest first) with pause, resume, trigger now
and delete for keys with `jobs:write`.

Every read and action goes through the service `/v1/schedules` calls, in the viewer's tenants, with the same
refusals shown as readable pages (404, 409, 422).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.console.job_routes import Query, check_id
from app.console.session import Flash
from app.console.web import ViewerDep, back_to, checked_form, readable_errors, render
from app.core.times import utcnow
from app.models import Schedule, ScheduleRun
from app.schedules import service as schedules_service
from app.schedules.repository import ScheduleFilter
from app.schedules.timing import local

router = APIRouter(prefix="/ui", include_in_schema=False)

RUNS_PAGE_SIZE = 50
PAUSED_CHOICES = {"true": True, "false": False}


@dataclass(frozen=True)
class Moment:
    """One instant as the console shows a schedule's times: in UTC and in the schedule's zone."""

    utc: datetime
    local: str  # `2026-03-29 03:00:00+02:00 (CEST)`

    @classmethod
    def of(cls, at: datetime, tz_name: str) -> Moment:
        there = local(at, tz_name)
        return cls(utc=at, local=f"{there.isoformat(sep=' ', timespec='seconds')} ({there.tzname()})")


@dataclass(frozen=True)
class ScheduleRow:
    schedule: Schedule
    next_fire: Moment | None
    last_fire: Moment | None


@dataclass(frozen=True)
class RunRow:
    run: ScheduleRun
    scheduled_for: Moment


def _moment(at: datetime | None, tz_name: str) -> Moment | None:
    return None if at is None else Moment.of(at, tz_name)


def _row(schedule: Schedule, now: datetime) -> ScheduleRow:
    """The next fire that will submit a job, as the API's `next_fire_times[0]` (none while paused)."""
    fires = schedules_service.next_fires(schedule, now, 1)
    return ScheduleRow(
        schedule=schedule,
        next_fire=Moment.of(fires[0], schedule.timezone) if fires else None,
        last_fire=_moment(schedule.last_fire_at, schedule.timezone),
    )


@router.get("/schedules", response_class=HTMLResponse)
async def schedules_page(request: Request, viewer: ViewerDep) -> Response:
    params = request.query_params
    query = Query()
    report_type = query.text(params, "report_type", 100)
    paused = None
    raw_paused = str(params.get("paused") or "")
    if raw_paused in PAUSED_CHOICES:
        paused = PAUSED_CHOICES[raw_paused]
        query.pairs.append(("paused", raw_paused))
    elif raw_paused:
        query.errors.append("paused: true or false")
    query.paging(params)
    rows: list[ScheduleRow] = []
    next_href = None
    if not query.errors:
        flt = ScheduleFilter(scope=viewer.principal.tenant_scope, report_type=report_type, paused=paused)
        found = await schedules_service.list_schedules(flt, query.cursor, query.limit + 1)
        if len(found) > query.limit:
            found = found[: query.limit]
            next_href = query.href("/ui/schedules", cursor=found[-1].id)
        now = utcnow()
        rows = [_row(s, now) for s in found]
    return render(
        request, "schedules.html", viewer, page="schedules", query=query, rows=rows, next_href=next_href,
    )  # fmt: skip


@router.get("/schedules/{schedule_id}", response_class=HTMLResponse)
async def schedule_page(request: Request, viewer: ViewerDep, schedule_id: str) -> Response:
    check_id(schedule_id, "schedule")
    raw_before = str(request.query_params.get("runs_before") or "")
    before = int(raw_before) if raw_before.isdigit() else None
    with readable_errors():
        schedule, runs = await schedules_service.list_runs(
            schedule_id, viewer.principal.tenant_scope, before, RUNS_PAGE_SIZE + 1
        )
    older_href = None
    if len(runs) > RUNS_PAGE_SIZE:
        runs = runs[:RUNS_PAGE_SIZE]
        older_href = f"/ui/schedules/{schedule.id}?runs_before={runs[-1].id}"
    tz = schedule.timezone
    return render(
        request, "schedule.html", viewer, page="schedules", schedule=schedule,
        params_json=json.dumps(schedule.params, indent=2, sort_keys=True, ensure_ascii=False),
        next_fires=[Moment.of(f, tz) for f in schedules_service.next_fires(schedule)],
        start_at=_moment(schedule.start_at, tz), end_at=_moment(schedule.end_at, tz),
        last_fire=_moment(schedule.last_fire_at, tz),
        runs=[RunRow(r, Moment.of(r.fire_time, tz)) for r in runs], older_href=older_href,
        newest_href=f"/ui/schedules/{schedule.id}" if before is not None else None,
    )  # fmt: skip


@router.post("/schedules/{schedule_id}/pause")
async def pause_schedule(request: Request, viewer: ViewerDep, schedule_id: str) -> Response:
    await checked_form(request, viewer)
    check_id(schedule_id, "schedule")
    with readable_errors():
        schedule = await schedules_service.pause(schedule_id, viewer.principal.tenant_scope)
    text = f"Schedule {schedule.name} paused: nothing fires or is recorded until it is resumed."
    return back_to(f"/ui/schedules/{schedule.id}", Flash("ok", text))


@router.post("/schedules/{schedule_id}/resume")
async def resume_schedule(request: Request, viewer: ViewerDep, schedule_id: str) -> Response:
    await checked_form(request, viewer)
    check_id(schedule_id, "schedule")
    with readable_errors():
        schedule = await schedules_service.resume(schedule_id, viewer.principal.tenant_scope)
    fires = schedules_service.next_fires(schedule, count=1)
    then = f"; next fire {Moment.of(fires[0], schedule.timezone).local}" if fires else ""
    text = f"Schedule {schedule.name} resumed (the paused period is not caught up){then}."
    return back_to(f"/ui/schedules/{schedule.id}", Flash("ok", text))


@router.post("/schedules/{schedule_id}/trigger")
async def trigger_schedule(request: Request, viewer: ViewerDep, schedule_id: str) -> Response:
    await checked_form(request, viewer)
    check_id(schedule_id, "schedule")
    with readable_errors():
        schedule, run = await schedules_service.trigger(schedule_id, viewer.principal.tenant_scope)
    text = f"Schedule {schedule.name} triggered: job {run.job_id} submitted (a manual run)."
    return back_to(f"/ui/schedules/{schedule.id}", Flash("ok", text))


@router.post("/schedules/{schedule_id}/delete")
async def delete_schedule(request: Request, viewer: ViewerDep, schedule_id: str) -> Response:
    await checked_form(request, viewer)
    check_id(schedule_id, "schedule")
    scope = viewer.principal.tenant_scope
    with readable_errors():
        schedule = await schedules_service.get(schedule_id, scope)
        await schedules_service.delete(schedule_id, scope)
    text = f"Schedule {schedule.name} deleted with its run records; the jobs it made stay."
    return back_to("/ui/schedules", Flash("ok", text))
