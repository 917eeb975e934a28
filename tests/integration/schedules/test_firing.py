"""The firing engine on real MariaDB: each missed-runs policy after fires were missed, overlap skip and queue,
excluded dates, pause, end_at, manual triggers, and two concurrent firings making one job per fire time.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx

from app.core.states import JobStatus
from app.schedules.firing import fire_due
from tests.utils.schedules import (
    create_schedule,
    fire_records,
    make_due,
    schedule_jobs,
    schedule_row,
)

HOURLY = {"cron": "0 * * * *", "name": "hourly"}


def _base() -> datetime:
    """A whole hour a day ahead: far from the real clock, so only the `now` a test passes matters."""
    return (datetime.now(UTC) + timedelta(days=1)).replace(minute=0, second=0, microsecond=0)


async def _hourly(client: httpx.AsyncClient, auth: dict[str, str], base: datetime, **fields: Any) -> str:
    schedule = await create_schedule(client, auth, **{**HOURLY, **fields})
    await make_due(schedule["id"], base)
    return str(schedule["id"])


async def test_skip_records_every_missed_fire_and_submits_nothing(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    base = _base()
    sid = await _hourly(client, auth, base, missed_runs="skip")
    assert await fire_due(base + timedelta(hours=2, minutes=30)) == 0
    records = await fire_records(sid)
    assert [(f, r, why) for f, r, why, _ in records] == [
        (base + timedelta(hours=h), "skipped", "missed") for h in range(3)
    ]
    assert await schedule_jobs(sid) == []
    assert (await schedule_row(sid)).next_fire_at == base + timedelta(hours=3)


async def test_skip_still_submits_the_latest_fire_when_it_is_only_seconds_late(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    base = _base()
    sid = await _hourly(client, auth, base, missed_runs="skip")
    assert await fire_due(base + timedelta(hours=2, seconds=5)) == 1
    records = await fire_records(sid)
    assert [(r, why) for _, r, why, _ in records] == [
        ("skipped", "missed"),
        ("skipped", "missed"),
        ("submitted", None),
    ]
    [job] = await schedule_jobs(sid)
    assert records[2][3] == job.id and job.scheduled_for == base + timedelta(hours=2)


async def test_run_once_submits_the_latest_missed_fire_and_skips_the_rest(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    base = _base()
    sid = await _hourly(client, auth, base, missed_runs="run_once", params={"rows": 3})
    assert await fire_due(base + timedelta(hours=2, minutes=30)) == 1
    records = await fire_records(sid)
    assert [(f, r, why) for f, r, why, _ in records] == [
        (base, "skipped", "missed"),
        (base + timedelta(hours=1), "skipped", "missed"),
        (base + timedelta(hours=2), "submitted", None),
    ]
    [job] = await schedule_jobs(sid)
    assert (job.id, job.status, job.schedule_id) == (records[2][3], JobStatus.PENDING, sid)
    assert job.scheduled_for == base + timedelta(hours=2)
    assert (job.report_type, job.params["rows"], job.tenant) == ("demo.csv", 3, "acme")
    row = await schedule_row(sid)
    assert (row.last_job_id, row.last_fire_at) == (job.id, base + timedelta(hours=2))
    assert row.next_fire_at == base + timedelta(hours=3)


async def test_run_all_submits_each_missed_fire_oldest_first_up_to_max_catch_up(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    base = _base()
    sid = await _hourly(client, auth, base, missed_runs="run_all", max_catch_up=2)
    assert await fire_due(base + timedelta(hours=3, minutes=30)) == 2
    records = await fire_records(sid)
    assert [(r, why) for _, r, why, _ in records] == [
        ("skipped", "missed"),
        ("skipped", "missed"),
        ("submitted", None),
        ("submitted", None),
    ]
    jobs = await schedule_jobs(sid)
    assert [j.scheduled_for for j in jobs] == [base + timedelta(hours=2), base + timedelta(hours=3)]
    assert [j.id for j in jobs] == [records[2][3], records[3][3]]
    # The catch-up jobs run one after the other, never side by side.
    assert {j.ordering_key for j in jobs} == {f"schedule:{sid}"}


async def test_overlap_skip_records_a_fire_while_the_previous_job_is_unfinished(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    base = _base()
    sid = await _hourly(client, auth, base, overlap="skip")
    assert await fire_due(base + timedelta(seconds=1)) == 1
    [first] = await schedule_jobs(sid)
    assert first.status == JobStatus.PENDING  # no worker runs here: it stays unfinished
    assert await fire_due(base + timedelta(hours=1, seconds=1)) == 0
    records = await fire_records(sid)
    assert [(f, r, why) for f, r, why, _ in records] == [
        (base, "submitted", None),
        (base + timedelta(hours=1), "skipped", "overlap"),
    ]


async def test_overlap_queue_submits_every_fire_under_one_ordering_key(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    base = _base()
    sid = await _hourly(client, auth, base, overlap="queue")
    assert await fire_due(base + timedelta(seconds=1)) == 1
    assert await fire_due(base + timedelta(hours=1, seconds=1)) == 1
    jobs = await schedule_jobs(sid)
    assert [j.scheduled_for for j in jobs] == [base, base + timedelta(hours=1)]
    assert [j.ordering_key for j in jobs] == [f"schedule:{sid}"] * 2


async def test_overlap_allow_submits_beside_an_unfinished_job_without_an_ordering_key(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    base = _base()
    sid = await _hourly(client, auth, base, overlap="allow")
    assert await fire_due(base + timedelta(seconds=1)) == 1
    assert await fire_due(base + timedelta(hours=1, seconds=1)) == 1
    assert [j.ordering_key for j in await schedule_jobs(sid)] == [None, None]


async def test_a_fire_on_an_excluded_date_is_recorded_as_skipped_excluded_date(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    base = _base()
    tz = "Asia/Tokyo"
    local_day = base.astimezone(ZoneInfo(tz)).date().isoformat()
    sid = await _hourly(client, auth, base, timezone=tz, exclude_dates=[local_day])
    assert await fire_due(base + timedelta(seconds=1)) == 0
    assert [(r, why) for _, r, why, _ in await fire_records(sid)] == [("skipped", "excluded_date")]
    assert await schedule_jobs(sid) == []


async def test_a_paused_schedule_records_nothing(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    base = _base()
    sid = await _hourly(client, auth, base)
    resp = await client.post(f"/v1/schedules/{sid}/pause", headers=auth)
    assert resp.status_code == 200, resp.text
    await make_due(sid, base)
    assert await fire_due(base + timedelta(hours=2)) == 0
    assert await fire_records(sid) == []
    assert (await schedule_row(sid)).next_fire_at == base  # untouched: resume recomputes it


async def test_two_concurrent_firings_make_one_job_per_fire_time(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    base = _base()
    sids = [
        await _hourly(client, auth, base, name=f"race-{i}", missed_runs="run_all", overlap="allow")
        for i in range(3)
    ]
    now = base + timedelta(hours=2, seconds=1)
    counts = await asyncio.gather(fire_due(now), fire_due(now), fire_due(now))
    assert sum(counts) == 9
    for sid in sids:
        jobs = await schedule_jobs(sid)
        assert sorted(j.scheduled_for for j in jobs) == [base + timedelta(hours=h) for h in range(3)]
        assert len(await fire_records(sid)) == 3


async def test_a_schedule_past_its_end_at_has_no_next_fire(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    base = _base()
    end_at = (base + timedelta(hours=1, minutes=30)).isoformat().replace("+00:00", "Z")
    sid = await _hourly(client, auth, base, end_at=end_at, missed_runs="run_all", overlap="allow")
    assert await fire_due(base + timedelta(hours=3)) == 2
    assert [f for f, *_ in await fire_records(sid)] == [base, base + timedelta(hours=1)]
    assert (await schedule_row(sid)).next_fire_at is None
    assert await fire_due(base + timedelta(hours=9)) == 0


async def test_trigger_submits_one_job_now_recorded_as_manual(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    base = _base()
    sid = await _hourly(client, auth, base)
    resp = await client.post(f"/v1/schedules/{sid}/trigger", headers=auth)
    assert resp.status_code in (200, 201, 202), resp.text
    [job] = await schedule_jobs(sid)
    [(fire_time, result, reason, job_id)] = await fire_records(sid)
    assert (result, reason, job_id) == ("submitted", None, job.id)
    assert job.scheduled_for == fire_time and fire_time.microsecond % 1000 == 0
    assert abs((fire_time - datetime.now(UTC)).total_seconds()) < 5
    row = await schedule_row(sid)
    assert row.last_job_id == job.id and row.next_fire_at == base  # its own fires are unchanged
