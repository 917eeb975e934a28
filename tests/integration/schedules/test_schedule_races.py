"""Changes racing fires on real MariaDB: a PATCH, pause, trigger or late API clock meeting a fire never stops
a schedule, un-pauses it or undoes another change; a fire recorded already is passed over, never retried.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from app.core import failpoints
from app.schedules.firing import fire_due
from tests.utils.schedule_races import (
    api_clock,
    blind_first_look_at_recorded_fires,
    stop_patch_at_callback_check,
    trigger_clock,
    until_a_statement_waits_on,
)
from tests.utils.schedules import create_schedule, fire_records, make_due, schedule_jobs, schedule_row

HOURLY = {"cron": "0 * * * *", "name": "hourly", "overlap": "allow"}
HOOK = "https://hooks.example.com/reports"
SECOND = timedelta(seconds=1)
HOUR = timedelta(hours=1)
WAIT_S = 10  # for a step to reach the point where the test stops it


def _base() -> datetime:
    """A whole hour a day ahead: far from the real clock, so only the clocks a test sets matter."""
    return (datetime.now(UTC) + timedelta(days=1)).replace(minute=0, second=0, microsecond=0)


async def _hourly_from_an_api_at(
    client: httpx.AsyncClient, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch, now: datetime
) -> tuple[str, str]:
    """An hourly schedule made by an API whose clock says `now` (and keeps saying it); (id, url)."""
    api_clock(monkeypatch, now)
    schedule = await create_schedule(client, auth, **HOURLY)
    return schedule["id"], f"/v1/schedules/{schedule['id']}"


async def _scheduled_for(sid: str) -> list[datetime]:
    """The fire times of the schedule's jobs, oldest first."""
    return sorted(job.scheduled_for for job in await schedule_jobs(sid) if job.scheduled_for is not None)


@pytest.mark.parametrize(
    "change",
    [{"params": {"rows": 7}}, {"cron": "0 */1 * * *"}],
    ids=["naming_params_only", "naming_the_cron"],
)
async def test_a_patch_racing_a_fire_does_not_stop_the_schedule(
    client: httpx.AsyncClient, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch, change: dict[str, Any]
) -> None:
    base = _base()
    sid, url = await _hourly_from_an_api_at(client, auth, monkeypatch, base - 10 * 60 * SECOND)
    assert (await schedule_row(sid)).next_fire_at == base
    gate = stop_patch_at_callback_check(monkeypatch)
    patching = asyncio.create_task(client.patch(url, json={**change, "callback_url": HOOK}, headers=auth))
    await asyncio.wait_for(gate.entered.wait(), WAIT_S)  # the PATCH has read the schedule: next fire `base`
    fired, commit = asyncio.Event(), asyncio.Event()
    with failpoints.armed("schedule.before_fire_commit", failpoints.waiting(fired, commit)):
        firing = asyncio.create_task(fire_due(base + SECOND))
        try:
            await asyncio.wait_for(
                fired.wait(), WAIT_S
            )  # the fire of `base` is written and holds the row, not yet committed
            gate.proceed.set()
            await until_a_statement_waits_on("schedules")  # the PATCH's write waits for the fire's row lock
        finally:
            gate.proceed.set()
            commit.set()
        assert await firing == 1
    resp = await patching
    assert resp.status_code == 200, resp.text
    assert (await schedule_row(sid)).next_fire_at == base + HOUR
    assert await fire_due(base + HOUR + SECOND) == 1
    assert await _scheduled_for(sid) == [base, base + HOUR]


async def test_a_patch_racing_a_pause_keeps_the_schedule_paused(
    client: httpx.AsyncClient, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _base()
    sid, url = await _hourly_from_an_api_at(client, auth, monkeypatch, base - 10 * 60 * SECOND)
    gate = stop_patch_at_callback_check(monkeypatch)
    body = {"params": {"rows": 7}, "callback_url": HOOK}
    patching = asyncio.create_task(client.patch(url, json=body, headers=auth))
    await asyncio.wait_for(gate.entered.wait(), WAIT_S)  # the PATCH has read the schedule unpaused
    paused = await client.post(f"{url}/pause", headers=auth)
    assert paused.status_code == 200 and paused.json()["paused"] is True
    gate.proceed.set()
    resp = await patching
    assert resp.status_code == 200, resp.text
    assert (resp.json()["paused"], resp.json()["params"], resp.json()["callback_url"]) == (
        True,
        {"rows": 7},
        HOOK,
    )
    assert (await client.get(url, headers=auth)).json()["paused"] is True
    assert await fire_due(base + SECOND) == 0
    assert await fire_records(sid) == []


async def test_two_racing_patches_each_keep_the_fields_the_other_named(
    client: httpx.AsyncClient, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _base()
    _, url = await _hourly_from_an_api_at(client, auth, monkeypatch, base - 10 * 60 * SECOND)
    gate = stop_patch_at_callback_check(monkeypatch)
    first = asyncio.create_task(
        client.patch(url, json={"params": {"rows": 7}, "callback_url": HOOK}, headers=auth)
    )
    await asyncio.wait_for(gate.entered.wait(), WAIT_S)
    second = await client.patch(url, json={"max_attempts": 3, "overlap": "queue"}, headers=auth)
    assert second.status_code == 200, second.text
    gate.proceed.set()
    assert (await first).status_code == 200
    final = (await client.get(url, headers=auth)).json()
    assert (final["params"], final["callback_url"]) == ({"rows": 7}, HOOK)
    assert (final["max_attempts"], final["overlap"]) == (3, "queue")


async def test_a_patch_from_an_api_whose_clock_is_behind_never_sets_the_schedule_back_behind_a_fire(
    client: httpx.AsyncClient, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _base()
    sid, url = await _hourly_from_an_api_at(client, auth, monkeypatch, base - 10 * 60 * SECOND)
    assert await fire_due(base + SECOND) == 1  # the scheduler's clock is 10 minutes ahead of the API's
    resp = await client.patch(url, json={"timezone": "Europe/Berlin"}, headers=auth)
    assert resp.status_code == 200, resp.text
    assert (await schedule_row(sid)).next_fire_at == base + HOUR
    assert await fire_due(base + HOUR + SECOND) == 1
    assert await _scheduled_for(sid) == [base, base + HOUR]


async def test_a_trigger_in_the_same_millisecond_as_a_fire_fires_once_and_keeps_firing(
    client: httpx.AsyncClient, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _base()
    sid, url = await _hourly_from_an_api_at(client, auth, monkeypatch, base - 10 * 60 * SECOND)
    trigger_clock(monkeypatch, base)
    resp = await client.post(f"{url}/trigger", headers=auth)
    assert resp.status_code == 202, resp.text
    assert resp.json()["fire_time"].startswith(base.strftime("%Y-%m-%dT%H:%M:%S.000"))
    assert await fire_due(base + SECOND) == 0  # `base` has had its one job: the manual run's
    assert (await schedule_row(sid)).next_fire_at == base + HOUR
    assert await fire_due(base + HOUR + SECOND) == 1
    assert await _scheduled_for(sid) == [base, base + HOUR]
    assert [(fire, result) for fire, result, _, _ in await fire_records(sid)] == [
        (base, "submitted"),
        (base + HOUR, "submitted"),
    ]


async def test_a_trigger_in_the_millisecond_a_fire_took_runs_one_millisecond_later(
    client: httpx.AsyncClient, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _base()
    sid, url = await _hourly_from_an_api_at(client, auth, monkeypatch, base - 10 * 60 * SECOND)
    assert await fire_due(base + SECOND) == 1
    trigger_clock(monkeypatch, base)
    resp = await client.post(f"{url}/trigger", headers=auth)
    assert resp.status_code == 202, resp.text
    assert await _scheduled_for(sid) == [base, base + timedelta(milliseconds=1)]
    assert await fire_due(base + HOUR + SECOND) == 1


async def test_a_schedule_set_back_behind_a_recorded_fire_still_fires_the_next_period(
    client: httpx.AsyncClient, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _base()
    sid, _ = await _hourly_from_an_api_at(client, auth, monkeypatch, base - 10 * 60 * SECOND)
    assert await fire_due(base + SECOND) == 1
    await make_due(sid, base)  # next_fire_at back on a fire already recorded (as an old writer left it)
    assert await fire_due(base + HOUR + SECOND) == 1
    assert await _scheduled_for(sid) == [base, base + HOUR]
    assert (await schedule_row(sid)).next_fire_at == base + 2 * HOUR
    assert await fire_due(base + 2 * HOUR + SECOND) == 1
    assert len(await fire_records(sid)) == 3


async def test_a_fire_conflicting_with_a_record_it_did_not_see_passes_it_over_on_a_second_look(
    client: httpx.AsyncClient, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _base()
    sid, _ = await _hourly_from_an_api_at(client, auth, monkeypatch, base - 10 * 60 * SECOND)
    assert await fire_due(base + SECOND) == 1
    await make_due(sid, base)
    looks = blind_first_look_at_recorded_fires(monkeypatch)
    # The first look inserts `base` again and meets the unique key for real; the second passes it over.
    assert await fire_due(base + HOUR + SECOND) == 1
    assert looks == [set(), {base}]
    assert await _scheduled_for(sid) == [base, base + HOUR]
    assert (await schedule_row(sid)).next_fire_at == base + 2 * HOUR
