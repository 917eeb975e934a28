"""A slow, plainly written cron for property tests: random crons that carry the values each field means, and
their fires worked out day by day and wall time by wall time, DST rules spelt out one case at a time.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from hypothesis import strategies as st


@dataclass(frozen=True)
class Field:
    """A cron field as written and the numbers it matches."""

    text: str
    values: frozenset[int]


@dataclass(frozen=True)
class Cron:
    minute: Field
    hour: Field
    day: Field
    month: Field
    weekday: Field  # 0-7, 0 and 7 both Sunday

    @property
    def text(self) -> str:
        return " ".join(f.text for f in (self.minute, self.hour, self.day, self.month, self.weekday))

    @property
    def real_time(self) -> bool:
        """cronie's wildcard jobs, but an hour step of two or more runs at fixed times."""
        return self.minute.text.startswith("*") or self.hour.text in ("*", "*/1")

    def matches_day(self, day: date) -> bool:
        weekday = day.isoweekday() % 7
        on_day = day.day in self.day.values
        on_weekday = weekday in self.weekday.values or (weekday == 0 and 7 in self.weekday.values)
        if self.day.text.startswith("*") or self.weekday.text.startswith("*"):
            days = on_day and on_weekday
        else:
            days = on_day or on_weekday  # both restricted: either one
        return day.month in self.month.values and days

    def wall_times(self, first: date, last: date) -> Iterator[datetime]:
        """Its wall times on the days from `first` to `last`, in order."""
        times = sorted(time(h, m) for h in self.hour.values for m in self.minute.values)
        day = first
        while day <= last:
            if self.matches_day(day):
                yield from (datetime.combine(day, t) for t in times)
            day += timedelta(days=1)


def _term(draw: st.DrawFn, low: int, high: int) -> Field:
    kind = draw(st.sampled_from(["star", "star_step", "one", "range", "range_step"]))
    if kind == "star":
        return Field("*", frozenset(range(low, high + 1)))
    if kind == "star_step":
        step = draw(st.integers(1, high - low + 1))
        return Field(f"*/{step}", frozenset(range(low, high + 1, step)))
    a = draw(st.integers(low, high))
    if kind == "one":
        return Field(str(a), frozenset({a}))
    b = draw(st.integers(a, high))
    if kind == "range":
        return Field(f"{a}-{b}", frozenset(range(a, b + 1)))
    step = draw(st.integers(1, max(1, b - a)))
    return Field(f"{a}-{b}/{step}", frozenset(range(a, b + 1, step)))


@st.composite
def fields(draw: st.DrawFn, low: int, high: int) -> Field:
    """A field: one term, or a list of up to three (a list starting with `*` is left alone)."""
    terms = [_term(draw, low, high)]
    if not terms[0].text.startswith("*"):
        terms += [_term(draw, low, high) for _ in range(draw(st.integers(0, 2)))]
        terms = [t for t in terms if not t.text.startswith("*")] or terms[:1]
    return Field(",".join(t.text for t in terms), frozenset().union(*(t.values for t in terms)))


def few(low: int, high: int, most: int = 3) -> st.SearchStrategy[Field]:
    """A list of one to `most` numbers (for a cron that fires a few times a day at most)."""
    numbers = st.sets(st.integers(low, high), min_size=1, max_size=most)
    return numbers.map(lambda n: Field(",".join(map(str, sorted(n))), frozenset(n)))


STAR_DAYS = (
    Field("*", frozenset(range(1, 32))),
    Field("*", frozenset(range(1, 13))),
    Field("*", frozenset(range(8))),
)


@st.composite
def crons(
    draw: st.DrawFn, minute: st.SearchStrategy[Field], hour: st.SearchStrategy[Field], any_day: bool = False
) -> Cron:
    """A cron of `minute` and `hour`; its day, month and weekday `*` if `any_day`, else random."""
    days = STAR_DAYS if any_day else (draw(fields(1, 31)), draw(fields(1, 12)), draw(fields(0, 7)))
    return Cron(draw(minute), draw(hour), *days)


def _instants(wall: datetime, tz: ZoneInfo) -> list[datetime]:
    """Each instant that reads `wall` in `tz`: none, one, or two when the clocks go back over it."""
    found = []
    for fold in (0, 1):
        instant = wall.replace(tzinfo=tz, fold=fold).astimezone(UTC)
        if instant.astimezone(tz).replace(tzinfo=None) == wall and instant not in found:
            found.append(instant)
    return found


def expected_fires(cron: Cron, tz: ZoneInfo, first: datetime, last: datetime) -> list[datetime]:
    """The fires from `first` to `last` (UTC, inclusive) by the rules of app.schedules.timing's docstring."""
    fires = set()
    walls = cron.wall_times(first.date() - timedelta(days=2), last.date() + timedelta(days=2))
    for wall in walls:
        instants = _instants(wall, tz)
        if instants:
            fires.update(instants if cron.real_time else instants[:1])
        elif not cron.real_time:  # skipped by the clocks: the first wall minute that exists after it
            after = wall
            while not (instants := _instants(after, tz)):
                after += timedelta(minutes=1)
            fires.add(instants[0])
    return sorted(f for f in fires if first <= f <= last)


@functools.cache
def clock_changes(tz: ZoneInfo, year: int) -> list[datetime]:
    """The hours (UTC) in `year` after which `tz` changes its offset."""
    hour = datetime(year, 1, 1, tzinfo=UTC)
    changes = []
    while hour.year == year:
        if hour.astimezone(tz).utcoffset() != (hour + timedelta(hours=1)).astimezone(tz).utcoffset():
            changes.append(hour)
        hour += timedelta(hours=1)
    return changes
