"""Which fires a policy submits or skips (pure): the latest fire within the misfire grace is on time, older
ones are missed; excluded dates never count as the latest; overlap skip skips what would be submitted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from app.models import Schedule
from app.schedules.firing import decide, ordering_key_of

BASE = datetime(2030, 1, 1, 8, tzinfo=UTC)
FIRES = [BASE + timedelta(hours=h) for h in range(4)]
ON_TIME = FIRES[-1] + timedelta(seconds=5)
LATE = FIRES[-1] + timedelta(minutes=30)


def _row(**fields: Any) -> Schedule:
    return Schedule(id="S" * 26, tenant="acme", name="s", report_type="demo.csv", cron="0 * * * *", **fields)


def _outcomes(row: Schedule, now: datetime, busy: bool = False) -> list[str | None]:
    return [d.reason for d in decide(row, FIRES, now, busy)]


def test_skip_submits_only_an_on_time_latest_fire() -> None:
    assert _outcomes(_row(missed_runs="skip"), LATE) == ["missed"] * 4
    assert _outcomes(_row(missed_runs="skip"), ON_TIME) == ["missed"] * 3 + [None]


def test_run_once_submits_the_latest_fire_late_or_not() -> None:
    assert _outcomes(_row(missed_runs="run_once"), LATE) == ["missed"] * 3 + [None]


def test_run_all_submits_the_newest_max_catch_up_missed_fires_plus_the_on_time_one() -> None:
    assert _outcomes(_row(missed_runs="run_all", max_catch_up=2), LATE) == ["missed", "missed", None, None]
    assert _outcomes(_row(missed_runs="run_all", max_catch_up=2), ON_TIME) == ["missed", None, None, None]


def test_an_excluded_date_is_never_the_fire_run_once_submits() -> None:
    row = _row(missed_runs="run_once", exclude_dates=["2030-01-01"])
    assert _outcomes(row, LATE) == ["excluded_date"] * 4


def test_overlap_skip_skips_what_would_run_while_the_previous_job_is_busy() -> None:
    assert _outcomes(_row(overlap="skip"), ON_TIME, busy=True) == ["missed"] * 3 + ["overlap"]
    assert _outcomes(_row(overlap="queue"), ON_TIME, busy=True) == ["missed"] * 3 + [None]


def test_skip_and_queue_schedules_share_a_private_ordering_key_allow_keeps_only_its_own() -> None:
    assert ordering_key_of(_row(overlap="skip")) == f"schedule:{'S' * 26}"
    assert ordering_key_of(_row(overlap="queue", ordering_key="mine")) == "mine"
    assert ordering_key_of(_row(overlap="allow")) is None


def test_a_fire_half_a_period_late_is_missed_whatever_the_grace() -> None:
    two_s = timedelta(seconds=2)
    fires = [BASE + n * two_s for n in range(3)]
    row = _row(missed_runs="skip")
    late = [d.reason for d in decide(row, fires, fires[-1] + timedelta(seconds=1.5), False, two_s)]
    assert late == ["missed"] * 3
    on_time = [d.reason for d in decide(row, fires, fires[-1] + timedelta(seconds=0.4), False, two_s)]
    assert on_time == ["missed", "missed", None]
