"""Cron days and DST as cronie has them: day of month OR weekday when both are restricted; a fixed-time cron
fires once per wall time and runs skipped fires after the gap; a wildcard cron follows real time."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from app.schedules.timing import BadSchedule, clock_for, fires_between, local
from tests.utils.cron_reference import Cron, Field, clock_changes, crons, expected_fires, few, fields

ANCHOR = datetime(2026, 1, 1, tzinfo=UTC)
MANY = 100_000
BERLIN, NEW_YORK = "Europe/Berlin", "America/New_York"


def local_day(cron: str, tz: str, day: date, until_hour: int = 24) -> list[str]:
    """The fires of `cron` on a local day of `tz` from midnight to `until_hour` o'clock (inclusive), as local
    ISO times; that hour must exist once that day."""
    zone = ZoneInfo(tz)
    first = datetime.combine(day, time(0), zone)
    last = datetime.combine(day + timedelta(days=until_hour // 24), time(until_hour % 24), zone)
    fires = fires_between(
        clock_for(cron, None, tz, ANCHOR), first.astimezone(UTC), last.astimezone(UTC), MANY
    )
    return [local(f, tz).isoformat(timespec="minutes") for f in fires]


def days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def test_a_day_of_month_and_a_weekday_fire_on_either() -> None:
    clock = clock_for("0 9 1,15 * 1", None, "UTC", ANCHOR)
    fires = fires_between(
        clock, datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 3, 31, 23, tzinfo=UTC), MANY
    )
    wanted = [d for d in days(date(2026, 1, 1), date(2027, 3, 31)) if d.day in (1, 15) or d.weekday() == 0]
    assert fires == [datetime.combine(d, time(9), UTC) for d in wanted]


def _monday(d: date) -> bool:
    return d.weekday() == 0


@pytest.mark.parametrize(
    ("cron", "matches"),
    [
        ("0 9 1,15 * *", lambda d: d.day in (1, 15)),
        ("0 9 * * 1", _monday),
        ("0 9 */2 * 1", lambda d: d.day % 2 == 1 and _monday(d)),  # `*/2` starts with a star: both apply
        ("0 9 1-7 * */6", lambda d: d.day <= 7 and d.weekday() in (5, 6)),
    ],
)
def test_when_a_day_field_starts_with_a_star_a_day_must_match_both(
    cron: str, matches: Callable[[date], bool]
) -> None:
    fires = fires_between(
        clock_for(cron, None, "UTC", ANCHOR), ANCHOR, datetime(2027, 3, 31, 23, tzinfo=UTC), MANY
    )
    assert fires == [
        datetime.combine(d, time(9), UTC) for d in days(ANCHOR.date(), date(2027, 3, 31)) if matches(d)
    ]


@pytest.mark.parametrize(
    ("cron", "tz", "day", "expected"),
    [
        # 02:00-02:59 does not exist on these days; what fell in it runs at 03:00 local, once.
        ("30 2 * * *", BERLIN, date(2026, 3, 29), ["2026-03-29T03:00+02:00"]),
        ("30 2 * * *", NEW_YORK, date(2026, 3, 8), ["2026-03-08T03:00-04:00"]),
        ("0,30 2 * * *", BERLIN, date(2026, 3, 29), ["2026-03-29T03:00+02:00"]),
        ("0 2,3 * * *", BERLIN, date(2026, 3, 29), ["2026-03-29T03:00+02:00"]),  # its own 03:00 as well
        ("0 */2 * * *", BERLIN, date(2026, 3, 29), ["2026-03-29T00:00+01:00", "2026-03-29T03:00+02:00"]),
        # Lord Howe springs forward half an hour, from 02:00 to 02:30.
        ("15 2 * * *", "Australia/Lord_Howe", date(2026, 10, 4), ["2026-10-04T02:30+11:00"]),
    ],
)
def test_a_fire_in_the_spring_forward_gap_runs_once_after_the_gap(
    cron: str, tz: str, day: date, expected: list[str]
) -> None:
    assert local_day(cron, tz, day, until_hour=3) == expected


@pytest.mark.parametrize(
    ("cron", "tz", "day", "expected"),
    [
        # 02:00-02:59 happens twice in Berlin: the step fires at the first 02:00 and not at the second.
        ("0 */2 * * *", BERLIN, date(2026, 10, 25),
         ["2026-10-25T00:00+02:00", "2026-10-25T02:00+02:00", "2026-10-25T04:00+01:00"]),
        # 01:00-01:59 happens twice in New York.
        ("0 1-23/2 * * *", NEW_YORK, date(2026, 11, 1), ["2026-11-01T01:00-04:00", "2026-11-01T03:00-05:00"]),
        ("15 */2 * * *", BERLIN, date(2026, 10, 25), ["2026-10-25T00:15+02:00", "2026-10-25T02:15+02:00"]),
    ],
)  # fmt: skip
def test_an_hourly_step_fires_once_per_wall_time_across_the_fall_back(
    cron: str, tz: str, day: date, expected: list[str]
) -> None:
    assert local_day(cron, tz, day, until_hour=4) == expected


@pytest.mark.parametrize("tz", [BERLIN, NEW_YORK])
@pytest.mark.parametrize("day", ["spring", "fall"])
def test_a_wildcard_minute_fires_every_half_real_hour_through_a_clock_change(tz: str, day: str) -> None:
    change = {
        (BERLIN, "spring"): date(2026, 3, 29), (BERLIN, "fall"): date(2026, 10, 25),
        (NEW_YORK, "spring"): date(2026, 3, 8), (NEW_YORK, "fall"): date(2026, 11, 1),
    }[tz, day]  # fmt: skip
    fires = [datetime.fromisoformat(f) for f in local_day("*/30 * * * *", tz, change, until_hour=6)]
    assert {b - a for a, b in pairwise(fires)} == {timedelta(minutes=30)}
    assert len(fires) == (6 - 1 if day == "spring" else 6 + 1) * 2 + 1  # the hour skipped, or the one twice


def test_a_wildcard_minute_in_a_named_hour_fires_in_both_passes_and_not_when_skipped() -> None:
    fall = local_day("*/15 2 * * *", BERLIN, date(2026, 10, 25))
    assert fall == [f"2026-10-25T02:{m:02}+02:00" for m in (0, 15, 30, 45)] + [
        f"2026-10-25T02:{m:02}+01:00" for m in (0, 15, 30, 45)
    ]
    assert local_day("*/15 2 * * *", BERLIN, date(2026, 3, 29)) == []


def _matches(
    cron: Cron, tz: ZoneInfo, first: datetime, last: datetime
) -> tuple[list[datetime], list[datetime]]:
    try:
        clock = clock_for(cron.text, None, tz.key, ANCHOR)
    except BadSchedule:
        assume(False)  # a date that never comes (Feb 30): refused, covered in test_timing
        raise
    return fires_between(clock, first, last, MANY), expected_fires(cron, tz, first, last)


@settings(max_examples=50, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cron=crons(few(0, 59, most=2), few(0, 23, most=1)), start=st.dates(date(2025, 1, 1), date(2030, 12, 31))
)
@example(cron=Cron(Field("0", frozenset({0})), Field("9", frozenset({9})),
                   Field("1,15", frozenset({1, 15})), Field("*", frozenset(range(1, 13))),
                   Field("1", frozenset({1}))), start=date(2026, 1, 1))  # fmt: skip
def test_utc_fires_are_every_matching_time_in_order_over_a_year(cron: Cron, start: date) -> None:
    first = datetime.combine(start, time(0), UTC)
    fires, expected = _matches(cron, ZoneInfo("UTC"), first, first + timedelta(days=400))
    assert all(a < b for a, b in pairwise(fires))
    assert fires == expected


ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago"]


@settings(max_examples=80, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cron=crons(st.one_of(few(0, 59), fields(0, 59)), st.one_of(few(0, 23), fields(0, 23)), any_day=True),
    tz_name=st.sampled_from(ZONES),
    which=st.integers(0, 1),
)
def test_fires_around_a_clock_change_follow_the_documented_rules(
    cron: Cron, tz_name: str, which: int
) -> None:
    tz = ZoneInfo(tz_name)
    change = clock_changes(tz, 2026)[which]
    fires, expected = _matches(cron, tz, change - timedelta(hours=6), change + timedelta(hours=6))
    assert all(a < b for a, b in pairwise(fires))
    assert fires == expected
