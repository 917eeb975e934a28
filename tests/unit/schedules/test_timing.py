"""Fire times from cron and intervals in a zone: DST days fire once for a named hour and every real hour for a
`*` hour; standard cron weekday numbers; bad crons, zones and never-firing dates are refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from app.schedules.timing import BadSchedule, clock_for, fires_after, fires_between, local, next_after

ANCHOR = datetime(2026, 1, 1, tzinfo=UTC)
# Noon UTC on the day before each 2026 clock change.
BERLIN_BACK, NY_BACK = datetime(2026, 10, 24, 12, tzinfo=UTC), datetime(2026, 10, 31, 12, tzinfo=UTC)
BERLIN_FORWARD, NY_FORWARD = datetime(2026, 3, 28, 12, tzinfo=UTC), datetime(2026, 3, 7, 12, tzinfo=UTC)


def local_fires(cron: str, tz: str, after: datetime, count: int) -> list[str]:
    clock = clock_for(cron, None, tz, ANCHOR)
    return [local(f, tz).isoformat() for f in fires_after(clock, after, count)]


@pytest.mark.parametrize(
    ("tz", "day_before", "expected"),
    [
        # Clocks go back: 02:30 happens twice in Berlin (and 01:30 in New York); a 02:30 job fires once.
        ("Europe/Berlin", BERLIN_BACK, ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]),
        ("America/New_York", NY_BACK, ["2026-11-01T02:30:00-05:00", "2026-11-02T02:30:00-05:00"]),
        # Clocks go forward: 02:30 does not exist; it fires once, as the gap ends (03:00 local).
        ("Europe/Berlin", BERLIN_FORWARD, ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"]),
        ("America/New_York", NY_FORWARD, ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"]),
    ],
)  # fmt: skip
def test_a_daily_0230_fires_exactly_once_on_dst_days(
    tz: str, day_before: datetime, expected: list[str]
) -> None:
    assert local_fires("30 2 * * *", tz, day_before, 2) == expected


@pytest.mark.parametrize("tz", ["Europe/Berlin", "America/New_York"])
def test_an_hourly_schedule_fires_every_real_hour_across_fall_back(tz: str) -> None:
    start = (
        datetime(2026, 10, 24, 20, tzinfo=UTC)
        if tz == "Europe/Berlin"
        else datetime(2026, 10, 31, 23, tzinfo=UTC)
    )
    clock = clock_for("0 * * * *", None, tz, ANCHOR)
    fires = fires_after(clock, start, 10)
    gaps = {b - a for a, b in pairwise(fires)}
    assert gaps == {timedelta(hours=1)}  # no skip, no double: 10 consecutive real hours
    assert len({local(f, tz).fold for f in fires}) == 2  # and the repeated wall hour is among them


def test_six_fields_put_seconds_first() -> None:
    clock = clock_for("*/2 * * * * *", None, "UTC", ANCHOR)
    assert fires_after(clock, datetime(2026, 5, 1, tzinfo=UTC), 3) == [
        datetime(2026, 5, 1, 0, 0, s, tzinfo=UTC) for s in (2, 4, 6)
    ]


def test_weekday_numbers_mean_what_they_mean_in_cron() -> None:
    friday = datetime(2026, 11, 20, tzinfo=UTC)
    weekdays = fires_after(clock_for("0 9 * * 1-5", None, "UTC", ANCHOR), friday, 5)
    assert [f.strftime("%a") for f in weekdays] == ["Fri", "Mon", "Tue", "Wed", "Thu"]
    assert {
        f.strftime("%a") for f in fires_after(clock_for("0 9 * * 0", None, "UTC", ANCHOR), friday, 3)
    } == {"Sun"}
    assert {
        f.strftime("%a") for f in fires_after(clock_for("0 9 * * 7", None, "UTC", ANCHOR), friday, 3)
    } == {"Sun"}


def test_an_interval_counts_from_its_anchor() -> None:
    clock = clock_for(None, 90, "UTC", ANCHOR)
    assert next_after(clock, ANCHOR + timedelta(seconds=100)) == ANCHOR + timedelta(seconds=180)


def test_fires_between_keeps_the_newest_up_to_the_limit() -> None:
    clock = clock_for("0 * * * *", None, "UTC", ANCHOR)
    fires = fires_between(clock, datetime(2026, 5, 1, 0, tzinfo=UTC), datetime(2026, 5, 1, 5, tzinfo=UTC), 3)
    assert [f.hour for f in fires] == [3, 4, 5]


@pytest.mark.parametrize(
    ("cron", "interval_s", "tz", "field", "words"),
    [
        ("0 0 30 2 *", None, "UTC", "cron", "never fires"),
        ("61 * * * *", None, "UTC", "cron", "invalid cron"),
        ("* * *", None, "UTC", "cron", "5 fields"),
        ("0 9 * * 8", None, "UTC", "cron", "out of 0-7"),
        ("0 0 * * mon#9", None, "UTC", "cron", "not a number 0-7"),
        ("* * * * *", None, "Mars/Olympus_Mons", "timezone", "unknown time zone"),
        (None, 0.5, "UTC", "interval_s", "at least 1"),
        ("* * * * *", 60, "UTC", "cron", "exactly one"),
        (None, None, "UTC", "cron", "exactly one"),
    ],
)
def test_bad_input_is_refused_with_the_field_at_fault(
    cron: str | None, interval_s: float | None, tz: str, field: str, words: str
) -> None:
    with pytest.raises(BadSchedule) as info:
        clock_for(cron, interval_s, tz, ANCHOR)
    assert info.value.field == field and words in str(info.value)
