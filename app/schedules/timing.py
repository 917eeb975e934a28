"""When a schedule fires: a standard cron (5 fields, or 6 with seconds first) read on the wall clock of an
IANA time zone, or a fixed interval of real seconds; pure functions, no I/O.

Days follow Vixie cron and cronie: when both the day-of-month and the day-of-week field are restricted
(neither starts with `*`), a day matches if either does (`0 9 1,15 * 1`: the 1st, the 15th and every Monday);
when one starts with `*`, only the other restricts. DST follows cronie's cron(8): a cron that runs at least
hourly by a wildcard (its minute, or seconds, field starts with `*`, or its hour is `*` or `*/1`) runs on
real time: every wall time that exists fires, both times when the clocks go back, and none that the clocks
skip. Any other cron is fixed-time (`30 2 * * *`, `0 */2 * * *`): a wall time that happens twice fires once,
the first time, and fires the clocks skip run at the first instant after the gap (03:00 in Berlin), as one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

# Standard cron numbers Sunday 0 (or 7) … Saturday 6, APScheduler Monday 0; names mean the same to both.
DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DOW_PART = re.compile(r"^(\*|\d+)(?:-(\d+))?(?:/(\d+))?$")
_DOW_NAMES = re.compile(r"^(sun|mon|tue|wed|thu|fri|sat)(-(sun|mon|tue|wed|thu|fri|sat))?$")
# How far ahead a cron must fire at least once (a "Feb 30" never does).
NEVER_AFTER = timedelta(days=366 * 8)
# Clock changes a real-time cron may skip in a row before it is deemed never to fire again (two a year).
_MAX_GAPS_SKIPPED = 32
_TICK = timedelta(microseconds=1)


class BadSchedule(ValueError):
    """A cron, zone or interval that cannot fire; `field` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise BadSchedule(
            "timezone", f"unknown time zone {name!r} (use an IANA name such as Europe/Berlin)"
        ) from exc


def _day_of_week(field: str) -> str:
    """A standard cron day-of-week field in APScheduler's terms: numbers become day names."""
    parts = []
    for part in field.lower().split(","):
        match = _DOW_PART.match(part)
        if match is None:
            if not _DOW_NAMES.match(part):  # not standard cron (e.g. Quartz's mon#2): refused, not guessed
                message = f"day of week {part!r} is not a number 0-7 or a name such as mon-fri"
                raise BadSchedule("cron", message)
            parts.append(part)
            continue
        start, end, step = match.groups()
        if start == "*" and step is None:
            parts.append("*")
            continue
        low = 0 if start == "*" else int(start)
        high = 6 if start == "*" else int(end if end is not None else (6 if step else start))
        if not (0 <= low <= 7 and 0 <= high <= 7) or low > high:
            raise BadSchedule("cron", f"day of week {part!r} is out of 0-7")
        parts.extend(DAY_NAMES[d] for d in range(low, high + 1, int(step or 1)))
    return ",".join(dict.fromkeys(parts))


@dataclass(frozen=True)
class Clock:
    """A schedule's trigger in its zone. A cron's trigger (`wall_clock`) counts the zone's wall time, written
    as if it were UTC, and next_after maps it to real instants; an interval's counts real time. `fixed_time`:
    a cron not on real time (see the module's docstring for both kinds across DST)."""

    trigger: BaseTrigger
    tz: ZoneInfo
    wall_clock: bool
    fixed_time: bool


def _runs_on_real_time(second: str, minute: str, hour: str) -> bool:
    """cronie runs a `*` minute or hour on real time; its cron(8) keeps an hour step above one
    (`0 */2 * * *`) with the fixed-time jobs, as it runs less often than hourly."""
    return second.startswith("*") or minute.startswith("*") or hour in ("*", "*/1")


def _cron_fields(expression: str) -> list[str]:
    fields = expression.split()
    if len(fields) == 5:
        fields = ["0", *fields]
    if len(fields) != 6:
        raise BadSchedule("cron", "a cron has 5 fields (minute hour day month weekday) or 6 (seconds first)")
    return fields


def _wall_trigger(expression: str, fields: list[str]) -> BaseTrigger:
    """The cron's wall times, in UTC's terms; day of month OR day of week when both are restricted."""
    second, minute, hour, day, month, dow = fields
    weekdays = _day_of_week(dow)
    either = not (day.startswith("*") or dow.startswith("*"))  # both restricted: either day field matches
    days = [(day, "*"), ("*", weekdays)] if either else [(day, weekdays)]
    times = {"second": second, "minute": minute, "hour": hour, "month": month}
    try:
        triggers = [CronTrigger(**times, day=d, day_of_week=w, timezone=UTC) for d, w in days]
    except ValueError as exc:
        raise BadSchedule("cron", f"invalid cron {expression!r}: {exc}") from exc
    trigger: BaseTrigger = triggers[0] if len(triggers) == 1 else OrTrigger(triggers)
    now = datetime.now(UTC)
    first = trigger.get_next_fire_time(None, now)
    if first is None or first - now > NEVER_AFTER:
        raise BadSchedule("cron", f"cron {expression!r} never fires (a date such as Feb 30?)")
    return trigger


def clock_for(cron: str | None, interval_s: float | None, tz_name: str, anchor: datetime) -> Clock:
    """The clock of a schedule; an interval counts from `anchor` (its start_at, else its creation)."""
    tz = zone(tz_name)
    if (cron is None) == (interval_s is None):
        raise BadSchedule("cron", "give exactly one of cron and interval_s")
    if cron is not None:
        fields = _cron_fields(cron)
        fixed_time = not _runs_on_real_time(*fields[:3])
        return Clock(_wall_trigger(cron, fields), tz, wall_clock=True, fixed_time=fixed_time)
    assert interval_s is not None
    if interval_s < 1:
        raise BadSchedule("interval_s", "interval_s must be at least 1")
    trigger = IntervalTrigger(seconds=interval_s, start_date=anchor, timezone=tz)
    return Clock(trigger, tz, wall_clock=False, fixed_time=False)


def _naive(instant: datetime, offset: timedelta) -> datetime:
    """The wall time of `instant` at a UTC offset, without a zone."""
    return instant.astimezone(UTC).replace(tzinfo=None) + offset


def _offset(instant: datetime, tz: ZoneInfo) -> timedelta:
    offset = instant.astimezone(tz).utcoffset()
    assert offset is not None
    return offset


def _instants(wall: datetime, tz: ZoneInfo) -> tuple[datetime, datetime] | None:
    """The instants (UTC) of a wall time in `tz`: the first and second time it happens, equal unless the
    clocks went back over it; None when the clocks skipped it."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if _naive(first, _offset(first, tz)) != wall.replace(fold=0):
        return None
    return first, wall.replace(tzinfo=tz, fold=1).astimezone(UTC)


def _clock_change(before: datetime, after: datetime, tz: ZoneInfo) -> datetime:
    """The instant in (before, after] from which the UTC offset is `after`'s (a different one held at
    `before`); zone offsets change on whole seconds."""
    low, high = math.floor(before.timestamp()), math.ceil(after.timestamp())
    target = _offset(after, tz)
    while high - low > 1:
        middle = (low + high) // 2
        if _offset(datetime.fromtimestamp(middle, UTC), tz) == target:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, UTC)


def _gap_end(wall: datetime, tz: ZoneInfo) -> datetime:
    """The first instant after the clocks skipped `wall` (for 02:30 in Berlin, 03:00 local)."""
    # In a gap, fold 1 reads the wall time with the new offset (an instant before the change), fold 0 with
    # the old one (an instant after it).
    before = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    return _clock_change(before, wall.replace(tzinfo=tz, fold=0).astimezone(UTC), tz)


def _next_wall(clock: Clock, start: datetime, inclusive: bool) -> datetime:
    """The cron's first wall time at or after `start` (strictly after unless `inclusive`)."""
    now = start.replace(tzinfo=UTC, fold=0) + (timedelta(0) if inclusive else _TICK)
    wall = clock.trigger.get_next_fire_time(None, now)  # whole seconds: APScheduler rounds `now` up
    assert wall is not None  # checked when the clock was built: it fires within NEVER_AFTER, for ever
    return wall.replace(tzinfo=None)


def _first_fire_from(clock: Clock, start: datetime, inclusive: bool) -> datetime:
    """The first instant of the cron's wall times from `start` on, each read the first time it happens; a
    skipped one runs at the end of its gap (fixed-time) or not at all (real time)."""
    wall = _next_wall(clock, start, inclusive)
    for _ in range(_MAX_GAPS_SKIPPED):
        instants = _instants(wall, clock.tz)
        if instants is not None:
            return instants[0]
        gap_end = _gap_end(wall, clock.tz)
        if clock.fixed_time:
            return gap_end
        wall = _next_wall(clock, _naive(gap_end, _offset(gap_end, clock.tz)), inclusive=True)
    raise RuntimeError(f"cron of {clock.tz.key} fires only at wall times its clock changes skip")


def _next_cron_fire(clock: Clock, after: datetime) -> datetime:
    local = after.astimezone(clock.tz)
    wall = local.replace(tzinfo=None, fold=0)
    instants = _instants(wall, clock.tz)
    assert instants is not None  # the wall time of an instant exists
    first, second = instants
    if first == second:  # no clock change around: wall times after this one map to later instants
        return _first_fire_from(clock, wall, inclusive=False)
    # The clocks go back over this wall time: the repeated span is [start, end) in wall time.
    change = _clock_change(first, second, clock.tz)
    start, end = _naive(change, _offset(second, clock.tz)), _naive(change, _offset(first, clock.tz))
    fires = []
    if local.fold == 0:
        fires.append(_first_fire_from(clock, wall, inclusive=False))
    else:  # the second pass: wall times up to `end` had their first instants before `after`
        fires.append(_first_fire_from(clock, end, inclusive=True))
    if not clock.fixed_time:  # real time: the second pass fires again
        repeat = _next_wall(clock, start, True) if local.fold == 0 else _next_wall(clock, wall, False)
        if repeat < end:
            fires.append(repeat.replace(tzinfo=clock.tz, fold=1).astimezone(UTC))
    return min(fires)


def next_after(clock: Clock, after: datetime) -> datetime:
    """The first fire strictly after `after`, in UTC (a clock built here always has one)."""
    if clock.wall_clock:
        return _next_cron_fire(clock, after)
    fire = clock.trigger.get_next_fire_time(None, after + _TICK)
    assert fire is not None
    return fire.astimezone(UTC)


def fires_after(clock: Clock, after: datetime, count: int) -> list[datetime]:
    fires: list[datetime] = []
    cursor = after
    for _ in range(count):
        cursor = next_after(clock, cursor)
        fires.append(cursor)
    return fires


def fires_between(clock: Clock, first: datetime, last: datetime, limit: int) -> list[datetime]:
    """Fires from `first` to `last` (both inclusive), oldest first; at most `limit`, the newest kept."""
    fires: list[datetime] = []
    cursor = next_after(clock, first - _TICK)
    while cursor <= last:
        fires.append(cursor)
        if len(fires) > limit:
            fires.pop(0)
        cursor = next_after(clock, cursor)
    return fires


def local(fire: datetime, tz_name: str) -> datetime:
    """A fire time in the schedule's zone, with its UTC offset."""
    return fire.astimezone(zone(tz_name))
