"""Use cases of schedules as the API and reportctl see them: create, read, list, patch, delete, pause, resume,
trigger and the run records. Each opens its own transaction; jobs are made only when a schedule fires.

A change writes only its own columns, as a compare-and-set on the schedule's `version`; a next fire it sets is
always after every fire recorded, so no change (late clock, stale read) sets a schedule back behind a fire.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.callbacks.service import check_callback_url
from app.core.db import session_scope
from app.core.errors import Conflict, NotFound, ValidationFailed
from app.core.ids import new_id
from app.core.tenancy import TenantScope
from app.core.times import utcnow
from app.destinations import service as destinations
from app.destinations.schemas import as_requested
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
# The fields that move the fires: a PATCH naming one computes the next fire again.
TIMING = frozenset({"cron", "interval_s", "timezone", "start_at", "end_at"})
# How many times a PATCH reads, checks and writes when another change lands between its read and its write.
PATCH_TRIES = 5
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
    deliver_to = notify_to = None
    try:
        deliver_to = await destinations.resolve_deliver_to(tenant, body.deliver_to)
        notify_to = await destinations.resolve_refs(tenant, body.notify_to, "notify_to")
    except ValidationFailed as exc:
        errors += exc.errors
    if errors or clock is None:
        raise ValidationFailed("The schedule is invalid.", errors)
    values = body.model_dump()
    values.update(exclude_dates=exclude, deliver_to=deliver_to, notify_to=notify_to)
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
    values = {name: getattr(row, name) for name in ScheduleCreate.model_fields}
    return {**values, "deliver_to": as_requested(row.deliver_to)}


def _merged(row: Schedule, patch: SchedulePatch) -> ScheduleCreate:
    """The schedule as it would be after the patch, checked like a create body."""
    changes = patch.changes()
    errors = [
        _field_error(f, "may not be null", "null") for f in NOT_NULL if f in changes and changes[f] is None
    ]
    if errors:
        raise ValidationFailed("The patch is invalid.", errors)
    merged = {**_as_create(row), **changes}
    for name in ("deliver_to", "notify_to"):
        if merged.get(name) is None:
            merged[name] = []  # null clears the destinations
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


def _columns(changes: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """What a patch writes: the fields it names (as checked and stored), and the other of cron / interval_s
    when it switches to one of them. Nothing else: a concurrent change of another field stays."""
    names = set(changes)
    for one, other in (("cron", "interval_s"), ("interval_s", "cron")):
        if changes.get(one) is not None:
            names.add(other)
    return {name: values[name] for name in names}


async def _next_fire_at(
    session: AsyncSession, schedule_id: str, clock: Clock, start_at: datetime | None, end_at: datetime | None
) -> datetime | None:
    """The first fire after now and after every fire recorded (call it with the row locked, so none is
    recorded meanwhile): an API host whose clock is behind the scheduler's never sets a schedule back to a
    fire it has had."""
    latest = await RunRepository(session).latest_fire(schedule_id)
    now = utcnow()
    return first_fire(clock, start_at, end_at, max(now, latest) if latest is not None else now)


async def _write_patch(row: Schedule, scope: TenantScope, columns: dict[str, Any], clock: Clock) -> bool:
    """`columns` written if the schedule is still as `row` read it (False: it changed, read it again).
    Naming a timing field, or un-pausing, sets the next fire again."""
    try:
        async with session_scope() as session:
            repo = ScheduleRepository(session)
            locked = await repo.get(row.id, scope, lock=True)  # no fire is recorded until we commit
            if locked is None:
                raise NotFound(f"No schedule {row.id!r}.")
            if locked.version != row.version:
                return False
            name = columns.get("name", row.name)
            if name != row.name and await repo.get_by_name(row.tenant, name) is not None:
                raise Conflict(f"A schedule named {name!r} exists already.")
            values = dict(columns)
            if TIMING & columns.keys() or (row.paused and columns.get("paused") is False):
                start_at, end_at = columns.get("start_at", row.start_at), columns.get("end_at", row.end_at)
                values["next_fire_at"] = await _next_fire_at(session, row.id, clock, start_at, end_at)
            values["updated_at"] = utcnow()
            return await repo.update_if_version(row.id, row.version, values) == 1
    except IntegrityError as exc:  # a concurrent create or rename took the name
        raise Conflict(f"A schedule named {columns.get('name')!r} exists already.") from exc


async def patch(schedule_id: str, scope: TenantScope, body: SchedulePatch) -> Schedule:
    """Change the fields named, and only them, at once (a concurrent change of other fields, a pause or a
    fire stays). Naming cron, interval_s, timezone, start_at or end_at (or un-pausing) computes the next fire
    again from now (no catch-up of the old definition), never at or before a fire already recorded."""
    for _ in range(PATCH_TRIES):
        row = await get(schedule_id, scope)
        merged = _merged(row, body)
        values, clock = await _checked(row.tenant, merged, row.created_at)
        if await _write_patch(row, scope, _columns(body.changes(), values), clock):
            return await get(schedule_id, scope)
    raise Conflict(f"Schedule {schedule_id} kept changing while it was patched; try again.")


async def delete(schedule_id: str, scope: TenantScope) -> None:
    """The schedule and its run records go; the jobs it made stay. Jobs are made only at fire time, so no
    job of a future fire exists to clean up."""
    async with session_scope() as session:
        repo = ScheduleRepository(session)
        if await repo.get(schedule_id, scope) is None or await repo.delete(schedule_id) != 1:
            raise NotFound(f"No schedule {schedule_id!r}.")


async def pause(schedule_id: str, scope: TenantScope) -> Schedule:
    """No fire is acted on or recorded while paused; pausing a paused schedule changes nothing. One
    column-wise step: whatever else changes meanwhile, the schedule ends paused."""
    row = await get(schedule_id, scope)
    if not row.paused:
        async with session_scope() as session:
            await ScheduleRepository(session).pause(schedule_id, {"updated_at": utcnow()})
    return await get(schedule_id, scope)


async def resume(schedule_id: str, scope: TenantScope) -> Schedule:
    """Back to firing from the next future fire: the fires of the paused period are not caught up (a manual
    run's time is never fired again)."""
    async with session_scope() as session:
        repo = ScheduleRepository(session)
        row = await repo.get(schedule_id, scope, lock=True)
        if row is None:
            raise NotFound(f"No schedule {schedule_id!r}.")
        if row.paused:
            fire = await _next_fire_at(session, row.id, clock_of(row), row.start_at, row.end_at)
            values = {"paused": False, "next_fire_at": fire, "updated_at": utcnow()}
            if await repo.update_if_version(schedule_id, row.version, values) != 1:
                raise Conflict(f"Schedule {schedule_id} changed while it was resumed; try again.")
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
