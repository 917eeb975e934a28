"""When a schedule fires: standard cron (5 fields, or 6 with seconds first) or a fixed interval, in an IANA
time zone, computed by APScheduler's triggers (DST included); pure functions, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

# Standard cron numbers Sunday 0 (or 7) … Saturday 6, APScheduler Monday 0; names mean the same to both.
DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DOW_PART = re.compile(r"^(\*|\d+)(?:-(\d+))?(?:/(\d+))?$")
_DOW_NAMES = re.compile(r"^(sun|mon|tue|wed|thu|fri|sat)(-(sun|mon|tue|wed|thu|fri|sat))?$")
# How far ahead a cron must fire at least once (a "Feb 30" never does).
NEVER_AFTER = timedelta(days=366 * 8)


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
    """A schedule's trigger in its zone. `once_per_wall_time`: a cron naming its hours fires once when the
    clocks go back and that wall time happens twice (as cron does); a `*` hour fires every real hour."""

    trigger: BaseTrigger
    tz: ZoneInfo
    once_per_wall_time: bool


def cron_trigger(expression: str, tz: ZoneInfo) -> CronTrigger:
    fields = expression.split()
    if len(fields) == 5:
        fields = ["0", *fields]
    if len(fields) != 6:
        raise BadSchedule("cron", "a cron has 5 fields (minute hour day month weekday) or 6 (seconds first)")
    second, minute, hour, day, month, dow = fields
    try:
        trigger = CronTrigger(
            second=second, minute=minute, hour=hour, day=day, month=month,
            day_of_week=_day_of_week(dow), timezone=tz,
        )  # fmt: skip
    except ValueError as exc:
        raise BadSchedule("cron", f"invalid cron {expression!r}: {exc}") from exc
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
        fields = cron.split()
        hour = fields[-4] if len(fields) >= 4 else "*"
        return Clock(cron_trigger(cron, tz), tz, once_per_wall_time=not hour.startswith("*"))
    assert interval_s is not None
    if interval_s < 1:
        raise BadSchedule("interval_s", "interval_s must be at least 1")
    return Clock(IntervalTrigger(seconds=interval_s, start_date=anchor, timezone=tz), tz, False)


def next_after(clock: Clock, after: datetime) -> datetime:
    """The first fire strictly after `after`, in UTC (a clock built here always has one)."""
    cursor = after
    while True:
        fire = clock.trigger.get_next_fire_time(None, cursor + timedelta(microseconds=1))
        assert fire is not None
        fire = fire.astimezone(UTC)
        if not (clock.once_per_wall_time and fire.astimezone(clock.tz).fold == 1):
            return fire
        cursor = fire  # the second time this wall time happens: it already fired the first time


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
    cursor = next_after(clock, first - timedelta(microseconds=1))
    while cursor <= last:
        fires.append(cursor)
        if len(fires) > limit:
            fires.pop(0)
        cursor = next_after(clock, cursor)
    return fires


def local(fire: datetime, tz_name: str) -> datetime:
    """A fire time in the schedule's zone, with its UTC offset."""
    return fire.astimezone(zone(tz_name))
