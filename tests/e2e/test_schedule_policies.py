"""Schedule policies against real processes (api, worker, scheduler), schedules side by side per stack:

- a scheduler stopped (SIGTERM) across three fires of a 2 s cron, then started: `skip` records every missed
  fire as skipped/missed and makes no job for them, `run_once` submits only the latest, `run_all` one job per
  missed fire, oldest first. With a 2 s cron a fire is missed when it is acted on more than 1 s late
  (min(SCHEDULE_MISFIRE_GRACE_S, half the period));
- with the scheduler running: `overlap: skip` under a job slower than the interval, `exclude_dates` of
  today, pause/resume, trigger and delete.

Timings are tolerant (a loaded 2-core machine; the fire loop wakes at most every 0.5 s); counts and records
are exact.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.utils.polling import eventually
from tests.utils.stack import Stack

pytestmark = pytest.mark.timeout(120)

EVERY_2_S = "*/2 * * * * *"
PERIOD = timedelta(seconds=2)
#: min(SCHEDULE_MISFIRE_GRACE_S = 60, half of 2 s): a fire acted on later than this is missed.
MISFIRE = timedelta(seconds=1)
NEVER_BY_ITSELF = "0 0 1 1 *"  # once a year: only a trigger runs it within the test


def _ts(value: str) -> datetime | None:
    if value in ("", "NULL"):
        return None
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in value else "%Y-%m-%d %H:%M:%S"
    return datetime.strptime(value, fmt).replace(tzinfo=UTC)


def _sql_ts(value: datetime) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S.%f}"


def _runs(stack: Stack, schedule_id: str) -> list[dict[str, Any]]:
    """Every run record of a schedule, oldest fire first."""
    rows = stack.sql(
        "SELECT fire_time, result, IFNULL(reason, ''), IFNULL(job_id, ''), manual, created_at "
        f"FROM schedule_runs WHERE schedule_id = '{schedule_id}' ORDER BY fire_time"
    )
    return [
        {
            "fire": _ts(r[0]),
            "result": r[1],
            "reason": r[2] or None,
            "job_id": r[3] or None,
            "manual": r[4] == "1",
            "created_at": _ts(r[5]),
        }
        for r in rows
    ]


def _jobs(stack: Stack, where: str) -> list[dict[str, Any]]:
    rows = stack.sql(
        "SELECT id, status, scheduled_for, created_at, IFNULL(started_at, ''), IFNULL(finished_at, '') "
        f"FROM report_jobs WHERE {where} ORDER BY scheduled_for, created_at"
    )
    return [
        {
            "id": r[0],
            "status": r[1],
            "scheduled_for": _ts(r[2]),
            "created_at": _ts(r[3]),
            "started_at": _ts(r[4]),
            "finished_at": _ts(r[5]),
        }
        for r in rows
    ]


def _schedule_jobs(stack: Stack, schedule_id: str) -> list[dict[str, Any]]:
    return _jobs(stack, f"schedule_id = '{schedule_id}'")


async def _start(*starters: Callable[[], Any]) -> None:
    await asyncio.gather(*(asyncio.to_thread(start) for start in starters))


async def _create(stack: Stack, name: str, **fields: Any) -> str:
    body = {
        "name": name,
        "report_type": "demo.sleep",
        "params": {"seconds": 0},
        "cron": EVERY_2_S,
        **fields,
    }
    async with stack.client() as client:
        resp = await client.post("/v1/schedules", json=body)
    assert resp.status_code == 201, resp.text
    return str(resp.json()["id"])


async def _post(stack: Stack, path: str, expected: int = 200) -> dict[str, Any]:
    async with stack.client() as client:
        resp = await client.post(path)
    assert resp.status_code == expected, resp.text
    return dict(resp.json())


async def _sleep_until(moment: datetime) -> None:
    await asyncio.sleep(max(0.0, (moment - datetime.now(UTC)).total_seconds()))


def _all_done(stack: Stack, job_ids: list[str]) -> bool:
    if not job_ids:
        return True
    ids = ", ".join(f"'{i}'" for i in job_ids)
    statuses = [r[0] for r in stack.sql(f"SELECT status FROM report_jobs WHERE id IN ({ids})")]
    return len(statuses) == len(job_ids) and set(statuses) == {"done"}


# ---- missed runs -----------------------------------------------------------------------------------


async def test_scheduler_down_across_three_fires_skip_records_them_missed_and_run_all_runs_each_oldest_first(
    stack: Stack,
) -> None:
    await _start(stack.start_api, stack.start_worker)
    scheduler = stack.start_scheduler()
    sids = {
        "skip": await _create(stack, "missed-skip", missed_runs="skip", overlap="allow"),
        "run_once": await _create(stack, "missed-run-once", missed_runs="run_once", overlap="allow"),
        "run_all": await _create(
            stack, "missed-run-all", missed_runs="run_all", max_catch_up=10, overlap="queue"
        ),
    }

    def last_fire(sid: str) -> datetime | None:
        runs = _runs(stack, sid)
        return runs[-1]["fire"] if runs else None

    await eventually(lambda: all(last_fire(s) for s in sids.values()), 10, "a first fire of each schedule")
    assert scheduler.terminate() == 0, scheduler.tail()
    stopped = {policy: last_fire(sid) for policy, sid in sids.items()}
    assert all(stopped.values()), stopped
    # Sleep through three fires (+2, +4, +6 s) and 1.2 s more, so even the third is missed whatever the
    # scheduler's start-up time.
    await _sleep_until(max(f for f in stopped.values() if f) + 3 * PERIOD + timedelta(seconds=1.2))
    restarted_at = datetime.now(UTC)
    stack.start_scheduler()

    def catch_up(policy: str) -> list[dict[str, Any]]:
        """The records the restarted scheduler made in its first pass over this schedule."""
        after = [r for r in _runs(stack, sids[policy]) if r["fire"] > stopped[policy]]
        batch = [r for r in after if after and r["created_at"] == after[0]["created_at"]]
        return batch if len(batch) >= 3 else []

    batches: dict[str, list[dict[str, Any]]] = {}
    for policy in sids:
        batches[policy] = await eventually(lambda p=policy: catch_up(p), 20, f"{policy}'s catch-up recorded")

    for policy, batch in batches.items():
        start = stopped[policy]
        assert start is not None
        fires = [r["fire"] for r in batch]
        # Contiguous from the first fire slept through; at least the three slept through.
        assert fires == [start + PERIOD * (i + 1) for i in range(len(batch))], (policy, fires)
        assert all(f < restarted_at - MISFIRE for f in fires[:3]), (policy, fires, restarted_at)
        assert all(r["created_at"] - r["fire"] > MISFIRE for r in batch[:3]), (policy, batch)

    # skip: every late fire skipped/missed with no job; only a fire acted on within 1 s (the newest, if
    # the restarted scheduler got to it in time) is submitted.
    skip = batches["skip"]
    for r in skip:
        late = r["created_at"] - r["fire"] > MISFIRE
        if late or r is not skip[-1]:
            assert (r["result"], r["reason"], r["job_id"]) == ("skipped", "missed", None), r
        else:
            assert r["result"] == "submitted" and r["job_id"], r
    missed = {r["fire"] for r in skip if r["reason"] == "missed"}
    assert len(missed) >= 3
    skip_jobs = _schedule_jobs(stack, sids["skip"])
    assert [j for j in skip_jobs if j["scheduled_for"] in missed] == []
    # Every job of the skip schedule belongs to a submitted record, one each.
    submitted = {r["job_id"]: r["fire"] for r in _runs(stack, sids["skip"]) if r["result"] == "submitted"}
    # Read after the records: the schedule keeps firing, so jobs of fires newer than them are left out.
    newest = max(submitted.values(), default=None)
    listed = {
        j["id"]: j["scheduled_for"]
        for j in _schedule_jobs(stack, sids["skip"])
        if newest is not None and j["scheduled_for"] <= newest
    }
    assert listed == submitted

    # run_once: only the latest of the batch.
    run_once = batches["run_once"]
    assert [(r["result"], r["reason"]) for r in run_once[:-1]] == [("skipped", "missed")] * (
        len(run_once) - 1
    )
    assert run_once[-1]["result"] == "submitted" and run_once[-1]["job_id"]
    once_jobs = [
        j
        for j in _schedule_jobs(stack, sids["run_once"])
        if j["scheduled_for"] in {r["fire"] for r in run_once}
    ]
    assert [(j["id"], j["scheduled_for"]) for j in once_jobs] == [
        (run_once[-1]["job_id"], run_once[-1]["fire"])
    ]

    # run_all: one job per missed fire (max_catch_up 10 > the batch), made and run oldest first.
    run_all = batches["run_all"]
    assert len(run_all) <= 10
    assert all(r["result"] == "submitted" and r["reason"] is None and r["job_id"] for r in run_all), run_all
    batch_fires = {r["fire"] for r in run_all}
    all_jobs = [j for j in _schedule_jobs(stack, sids["run_all"]) if j["scheduled_for"] in batch_fires]
    assert [(j["id"], j["scheduled_for"]) for j in all_jobs] == [(r["job_id"], r["fire"]) for r in run_all]
    await eventually(
        lambda: _all_done(stack, [r["job_id"] for r in run_all]), 20, "the run_all catch-up done"
    )
    all_jobs = [j for j in _schedule_jobs(stack, sids["run_all"]) if j["scheduled_for"] in batch_fires]
    created = [j["created_at"] for j in all_jobs]
    assert created == sorted(created) and len(set(created)) == len(created), all_jobs
    started = [j["started_at"] for j in all_jobs]
    assert started == sorted(started), "the catch-up ran oldest fire first"
    for a, b in itertools.pairwise(all_jobs):
        assert a["finished_at"] <= b["started_at"], (a, b)

    # After the catch-up the schedules fire normally again.
    def fired_since(sid: str, after: datetime) -> bool:
        return any(r["fire"] > after and r["result"] == "submitted" for r in _runs(stack, sid))

    await eventually(lambda: fired_since(sids["skip"], skip[-1]["fire"]), 10, "skip fires on time again")
    for proc in stack.procs[:2]:
        proc.check_alive()


# ---- with the scheduler running ----------------------------------------------------------------------


async def test_overlap_skip_exclude_dates_pause_resume_trigger_and_delete_with_a_running_scheduler(
    stack: Stack,
) -> None:
    await _start(stack.start_api, stack.start_worker, stack.start_scheduler)
    today = datetime.now(UTC).date()
    # Tomorrow too, in case the test runs across midnight UTC.
    excluded_days = [today.isoformat(), (today + timedelta(days=1)).isoformat()]
    slow = await _create(stack, "slow-overlap-skip", params={"seconds": 5}, overlap="skip")
    holiday = await _create(stack, "holiday", exclude_dates=excluded_days, timezone="UTC")
    paused = await _create(stack, "pause-resume", overlap="allow")
    manual = await _create(stack, "manual-only", cron=NEVER_BY_ITSELF)
    doomed = await _create(stack, "to-delete", overlap="allow")
    results: dict[str, Any] = {}

    async def overlap() -> None:
        def two_started() -> list[dict[str, Any]]:
            jobs = [j for j in _schedule_jobs(stack, slow) if j["started_at"]]
            return jobs if len(jobs) >= 2 else []

        await eventually(two_started, 30, "the slow schedule's second job started")
        await _post(stack, f"/v1/schedules/{slow}/pause")
        results["overlap"] = True

    async def pause_resume() -> None:
        await eventually(
            lambda: any(r["result"] == "submitted" for r in _runs(stack, paused)), 10, "a first fire"
        )
        await _post(stack, f"/v1/schedules/{paused}/pause")
        paused_at = datetime.now(UTC)
        await asyncio.sleep(5)  # at least two fires while paused
        resumed_at = datetime.now(UTC)
        body = await _post(stack, f"/v1/schedules/{paused}/resume")
        assert body["paused"] is False

        def two_after_resume() -> bool:
            return sum(1 for r in _runs(stack, paused) if r["fire"] > resumed_at) >= 2

        await eventually(two_after_resume, 12, "two fires after resume")
        await _post(stack, f"/v1/schedules/{paused}/pause")
        results["pause"] = (paused_at, resumed_at)

    async def trigger() -> None:
        run = await _post(stack, f"/v1/schedules/{manual}/trigger", 202)
        assert run["manual"] is True and run["result"] == "submitted" and run["job_id"], run
        await eventually(lambda: _all_done(stack, [run["job_id"]]), 15, "the triggered job done")
        results["trigger"] = run

    async def delete() -> None:
        await eventually(
            lambda: len(_schedule_jobs(stack, doomed)) >= 2, 12, "two jobs of the doomed schedule"
        )
        async with stack.client() as client:
            resp = await client.delete(f"/v1/schedules/{doomed}")
            assert resp.status_code == 204, resp.text
            assert (await client.get(f"/v1/schedules/{doomed}")).status_code == 404
        before = _schedule_jobs(stack, doomed)
        await asyncio.sleep(3 * PERIOD.total_seconds() + 0.5)
        results["delete"] = before

    await asyncio.gather(overlap(), pause_resume(), trigger(), delete())
    for proc in stack.procs:
        proc.check_alive()

    # overlap: skip -- while a job runs its schedule's fires are skipped/overlap; jobs never overlap.
    slow_jobs = [j for j in _schedule_jobs(stack, slow) if j["started_at"]]
    first, second = slow_jobs[0], slow_jobs[1]
    assert first["finished_at"] is not None and first["finished_at"] <= second["started_at"], slow_jobs
    for a, b in itertools.pairwise(slow_jobs):
        assert a["finished_at"] is not None and a["finished_at"] <= b["started_at"], (a, b)
    slow_runs = _runs(stack, slow)
    between = [r for r in slow_runs if first["scheduled_for"] < r["fire"] < second["scheduled_for"]]
    assert len(between) >= 2, slow_runs  # a 5 s job spans at least two fires of a 2 s cron
    assert [(r["result"], r["reason"], r["job_id"]) for r in between] == [("skipped", "overlap", None)] * len(
        between
    )
    assert all(r["fire"] < first["finished_at"] for r in between), (between, first)
    slow_job_ids = {j["id"] for j in _schedule_jobs(stack, slow)}
    assert {r["job_id"] for r in slow_runs if r["result"] == "submitted"} == slow_job_ids
    assert {r["reason"] for r in slow_runs if r["result"] == "skipped"} <= {"overlap"}, slow_runs

    # exclude_dates of today: every fire recorded skipped/excluded_date, no job.
    holiday_runs = _runs(stack, holiday)
    assert len(holiday_runs) >= 5, holiday_runs
    assert {(r["result"], r["reason"], r["job_id"]) for r in holiday_runs} == {
        ("skipped", "excluded_date", None)
    }
    assert _schedule_jobs(stack, holiday) == []
    for a, b in itertools.pairwise(holiday_runs):
        assert b["fire"] - a["fire"] == PERIOD, holiday_runs

    # pause/resume: nothing recorded for the paused period, firing again from the next future fire.
    paused_at, resumed_at = results["pause"]
    pause_runs = _runs(stack, paused)
    assert [r for r in pause_runs if paused_at < r["fire"] < resumed_at] == [], pause_runs
    assert [r for r in pause_runs if paused_at < r["created_at"] < resumed_at] == [], pause_runs
    after = [r for r in pause_runs if r["fire"] > resumed_at]
    assert len(after) >= 2 and after[0]["fire"] - resumed_at <= PERIOD + timedelta(seconds=1), after
    assert all(r["result"] == "submitted" and r["job_id"] for r in after), after
    pause_jobs = _schedule_jobs(stack, paused)
    assert [j for j in pause_jobs if paused_at < j["scheduled_for"] < resumed_at] == []
    assert {j["id"] for j in pause_jobs} == {r["job_id"] for r in pause_runs if r["job_id"]}

    # trigger: exactly one job, now, recorded as a manual run.
    run = results["trigger"]
    manual_runs = _runs(stack, manual)
    assert [(r["job_id"], r["manual"], r["result"]) for r in manual_runs] == [
        (run["job_id"], True, "submitted")
    ]
    assert [j["id"] for j in _schedule_jobs(stack, manual)] == [run["job_id"]]
    async with stack.client() as client:
        runs_page = (await client.get(f"/v1/schedules/{manual}/runs")).json()
        job = (await client.get(f"/v1/jobs/{run['job_id']}")).json()
    assert [(i["job_id"], i["manual"]) for i in runs_page["items"]] == [(run["job_id"], True)]
    assert job["schedule_id"] == manual and job["status"] == "done"

    # delete: no job after the deletion, the jobs made before it stay.
    before = results["delete"]
    assert len(before) >= 2
    assert [j["id"] for j in _schedule_jobs(stack, doomed)] == [j["id"] for j in before]
    assert _runs(stack, doomed) == []  # its run records go with it
