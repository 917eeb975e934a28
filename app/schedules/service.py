"""Use cases of schedules as the API and reportctl see them: create, read, list, patch, delete, pause, resume,
trigger and the run records. Each opens its own transaction; jobs are made only when a schedule fires.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError

from app.callbacks.service import check_callback_url
from app.core.db import session_scope
from app.core.errors import Conflict, NotFound, ValidationFailed
from app.core.ids import new_id
from app.core.tenancy import TenantScope
from app.core.times import utcnow
from app.jobs.validation import validate_submit
from app.models import Schedule, ScheduleRun
from app.schedules.firing import submit_manual_run
from app.schedules.repository import ScheduleFilter, ScheduleRepository
from app.schedules.run_repository import RunRepository
from app.schedules.schemas import MAX_EXCLUDE_DATES, ScheduleCreate, SchedulePatch
from app.schedules.timing import BadSchedule, Clock, clock_for, next_after

NEXT_FIRES = 5
# How many fires `next_fires` looks at to find 5 that are not on an excluded date.
MAX_PREVIEW_SCAN = 2000
# What a PATCH may not set to null (the create body gives them defaults or requires them).
NOT_NULL: tuple[str, ...] = ("name", "report_type", "params", "timezone", "missed_runs", "max_catch_up")
NOT_NULL += ("overlap", "exclude_dates", "paused")
_EPSILON = timedelta(microseconds=1)


def _field_error(field: str | list[str | int], msg: str, kind: str) -> dict[str, Any]:
    return {"loc": field if isinstance(field, list) else [field], "msg": msg, "type": kind}


def _exclude_dates(raw: list[str], errors: list[dict[str, Any]]) -> list[str]:
    """The dates sorted and without repeats; a bad one adds an error naming its index."""
    dates: set[date] = set()
    for index, text in enumerate(raw):
        try:
            if len(text) != 10:
                raise ValueError(text)
            dates.add(date.fromisoformat(text))
        except ValueError:
            errors.append(_field_error(["exclude_dates", index], "not a date YYYY-MM-DD", "date"))
    if len(dates) > MAX_EXCLUDE_DATES:
        errors.append(_field_error("exclude_dates", f"more than {MAX_EXCLUDE_DATES} dates", "too_many"))
    return [d.isoformat() for d in sorted(dates)]


def _anchor(start_at: datetime | None, created_at: datetime) -> datetime:
    """What an interval counts from: start_at, else the schedule's creation."""
    return start_at or created_at


async def _checked(tenant: str, body: ScheduleCreate, created_at: datetime) -> tuple[dict[str, Any], Clock]:
    """Every check of a schedule's definition at once (ValidationFailed lists each bad field); returns the
    column values as stored and the schedule's clock."""
    errors: list[dict[str, Any]] = []
    try:
        # Checked now; stored as sent (the worker applies the type's defaults when each job runs).
        validate_submit(body.report_type, body.params, None, created_at)
    except ValidationFailed as exc:
        errors += exc.errors
    if body.callback_url and (problem := await check_callback_url(tenant, body.callback_url)):
        errors.append(_field_error("callback_url", problem, "callback_url"))
    clock: Clock | None = None
    try:
        clock = clock_for(body.cron, body.interval_s, body.timezone, _anchor(body.start_at, created_at))
    except BadSchedule as exc:
        errors.append(_field_error(exc.field, str(exc), f"bad_{exc.field}"))
    exclude = _exclude_dates(body.exclude_dates, errors)
    if body.start_at and body.end_at and body.end_at <= body.start_at:
        errors.append(_field_error("end_at", "end_at must be after start_at", "end_before_start"))
    if errors or clock is None:
        raise ValidationFailed("The schedule is invalid.", errors)
    values = body.model_dump()
    values.update(exclude_dates=exclude)
    return values, clock


def first_fire(
    clock: Clock, start_at: datetime | None, end_at: datetime | None, now: datetime
) -> datetime | None:
    """The first fire after `now` and not before `start_at`; None when that is past `end_at`."""
    after = max(now, start_at - _EPSILON) if start_at else now
    fire = next_after(clock, after)
    return None if end_at is not None and fire > end_at else fire


def clock_of(row: Schedule) -> Clock:
    return clock_for(row.cron, row.interval_s, row.timezone, _anchor(row.start_at, row.created_at))


def next_fires(row: Schedule, now: datetime | None = None, count: int = NEXT_FIRES) -> list[datetime]:
    """The next `count` fires that will submit a job: none while paused, excluded dates left out."""
    if row.paused:
        return []
    clock = clock_of(row)
    excluded = set(row.exclude_dates)
    fires: list[datetime] = []
    fire = first_fire(clock, row.start_at, row.end_at, now or utcnow())
    for _ in range(MAX_PREVIEW_SCAN):
        if fire is None or len(fires) == count or (row.end_at is not None and fire > row.end_at):
            break
        if fire.astimezone(clock.tz).date().isoformat() not in excluded:
            fires.append(fire)
        fire = next_after(clock, fire)
    return fires


async def create(tenant: str, body: ScheduleCreate) -> Schedule:
    now = utcnow()
    values, clock = await _checked(tenant, body, now)
    row = Schedule(
        id=new_id(),
        tenant=tenant,
        **values,
        next_fire_at=first_fire(clock, body.start_at, body.end_at, now),
        created_at=now,
        updated_at=now,
    )
    try:
        async with session_scope() as session:
            repo = ScheduleRepository(session)
            if await repo.get_by_name(tenant, body.name) is not None:
                raise Conflict(f"A schedule named {body.name!r} exists already.")
            await repo.add(row)
    except IntegrityError as exc:  # a concurrent create with the same name won
        raise Conflict(f"A schedule named {body.name!r} exists already.") from exc
    return row


async def get(schedule_id: str, scope: TenantScope) -> Schedule:
    async with session_scope() as session:
        row = await ScheduleRepository(session).get(schedule_id, scope)
    if row is None:
        raise NotFound(f"No schedule {schedule_id!r}.")
    return row


async def list_schedules(flt: ScheduleFilter, before_id: str | None, limit: int) -> list[Schedule]:
    async with session_scope() as session:
        return await ScheduleRepository(session).list(flt, before_id, limit)


def _as_create(row: Schedule) -> dict[str, Any]:
    return {name: getattr(row, name) for name in ScheduleCreate.model_fields}


def _merged(row: Schedule, patch: SchedulePatch) -> ScheduleCreate:
    """The schedule as it would be after the patch, checked like a create body."""
    changes = patch.changes()
    errors = [
        _field_error(f, "may not be null", "null") for f in NOT_NULL if f in changes and changes[f] is None
    ]
    if errors:
        raise ValidationFailed("The patch is invalid.", errors)
    merged = {**_as_create(row), **changes}
    for one, other in (("cron", "interval_s"), ("interval_s", "cron")):
        if changes.get(one) is not None and other not in changes:
            merged[other] = None  # naming one of the two switches to it
    try:
        return ScheduleCreate.model_validate(merged)
    except ValidationError as exc:
        raise ValidationFailed(
            "The patch is invalid.",
            [_field_error(list(e["loc"]), e["msg"], e["type"]) for e in exc.errors()],
        ) from exc


async def patch(schedule_id: str, scope: TenantScope, body: SchedulePatch) -> Schedule:
    """Change any field; the next fire is computed again from now (no catch-up of the old definition)."""
    now = utcnow()
    row = await get(schedule_id, scope)
    merged = _merged(row, body)
    values, clock = await _checked(row.tenant, merged, row.created_at)
    values.update(next_fire_at=first_fire(clock, merged.start_at, merged.end_at, now), updated_at=now)
    try:
        async with session_scope() as session:
            repo = ScheduleRepository(session)
            if merged.name != row.name and await repo.get_by_name(row.tenant, merged.name) is not None:
                raise Conflict(f"A schedule named {merged.name!r} exists already.")
            if await repo.update(schedule_id, values) != 1:
                raise NotFound(f"No schedule {schedule_id!r}.")
    except IntegrityError as exc:
        raise Conflict(f"A schedule named {merged.name!r} exists already.") from exc
    return await get(schedule_id, scope)


async def delete(schedule_id: str, scope: TenantScope) -> None:
    """The schedule and its run records go; the jobs it made stay. Jobs are made only at fire time, so no
    job of a future fire exists to clean up."""
    async with session_scope() as session:
        repo = ScheduleRepository(session)
        if await repo.get(schedule_id, scope) is None or await repo.delete(schedule_id) != 1:
            raise NotFound(f"No schedule {schedule_id!r}.")


async def pause(schedule_id: str, scope: TenantScope) -> Schedule:
    """No fire is acted on or recorded while paused; pausing a paused schedule changes nothing."""
    row = await get(schedule_id, scope)
    if not row.paused:
        async with session_scope() as session:
            await ScheduleRepository(session).update(schedule_id, {"paused": True, "updated_at": utcnow()})
    return await get(schedule_id, scope)


async def resume(schedule_id: str, scope: TenantScope) -> Schedule:
    """Back to firing from the next future fire: the fires of the paused period are not caught up."""
    row = await get(schedule_id, scope)
    if row.paused:
        now = utcnow()
        values = {
            "paused": False,
            "next_fire_at": first_fire(clock_of(row), row.start_at, row.end_at, now),
            "updated_at": now,
        }
        async with session_scope() as session:
            await ScheduleRepository(session).update(schedule_id, values)
    return await get(schedule_id, scope)


async def trigger(schedule_id: str, scope: TenantScope) -> tuple[Schedule, ScheduleRun]:
    """One run now, recorded as manual; the schedule's own fires are unchanged."""
    row = await get(schedule_id, scope)
    return row, await submit_manual_run(row)


async def list_runs(
    schedule_id: str, scope: TenantScope, before_id: int | None, limit: int
) -> tuple[Schedule, list[ScheduleRun]]:
    """The schedule (for its zone) and its fire records, newest first."""
    async with session_scope() as session:
        row = await ScheduleRepository(session).get(schedule_id, scope)
        if row is None:
            raise NotFound(f"No schedule {schedule_id!r}.")
        return row, await RunRepository(session).list_runs(schedule_id, before_id, limit)
