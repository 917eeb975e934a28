"""A schedule's owners (`notify_to`) hear once when a fire's job misses the schedule's deadline (and not when
it is on time), when a fire is missed while no scheduler ran, and when a fire's job dies.

Real MariaDB, Redis, in-process burst workers, the scheduler's fire loop and deadline check called with a
chosen `now`; the owners' destination is a webhook receiver that verifies signatures.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from app.attempts import service as attempts
from app.core.db import session_scope
from app.core.failpoints import FailpointOutage
from app.core.ids import new_id
from app.core.states import JobStatus
from app.core.times import utcnow
from app.destinations import slow_routes
from app.destinations.repository import DeliveryRepository, DestinationRepository
from app.maintenance.deadlines import check_deadlines
from app.models import ReportJob
from app.schedules.firing import fire_due
from tests.utils.database import statements_run
from tests.utils.destinations import deliveries, make_destination, told, webhook_body
from tests.utils.schedules import create_schedule, make_due, schedule_jobs
from tests.utils.workers import drain, drain_alerts


def next_whole_hour_a_day_ahead() -> datetime:
    """Far from the real clock: only the `now` a test passes matters."""
    return (utcnow() + timedelta(days=1)).replace(minute=0, second=0, microsecond=0)


async def hourly_with_owners(
    client: httpx.AsyncClient, auth: dict[str, str], base: datetime, **fields: Any
) -> str:
    fields.setdefault("name", f"hourly-{base:%H}")
    schedule = await create_schedule(client, auth, cron="0 * * * *", notify_to=["warehouse-hook"], **fields)
    await make_due(schedule["id"], base)
    return str(schedule["id"])


def notices(receiver: Any, event: str) -> list[dict[str, Any]]:
    """The notices of `event` the receiver accepted, whether alone or in a digest."""
    return [n for n in told(receiver) if n.get("notice") == event]


async def test_a_late_fire_tells_its_owners_once_and_an_on_time_one_not_at_all(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any
) -> None:
    await make_destination(client, auth, webhook_body(receiver))
    base = next_whole_hour_a_day_ahead()
    deadline = f"{base + timedelta(minutes=30):%H:%M}"  # UTC schedules: the fire's own day
    late = await hourly_with_owners(client, auth, base, deadline=deadline, params={"rows": 1})
    assert await fire_due(base + timedelta(seconds=1)) == 1  # its job is not run: still pending at 00:30
    assert await check_deadlines(base + timedelta(minutes=29)) == 0  # not yet
    assert await check_deadlines(base + timedelta(minutes=31)) == 1
    assert await check_deadlines(base + timedelta(minutes=45)) == 0  # each fire is checked once
    await drain_alerts()
    [notice] = notices(receiver, "late")
    assert notice["schedule_id"] == late and notice["facts"]["State"] == "pending"
    assert deadline in notice["facts"]["Deadline"]
    assert receiver.accepted[0].headers["x-report-event"] == "report.notice"

    on_time_base = base + timedelta(hours=1)
    on_time = await hourly_with_owners(client, auth, on_time_base, deadline=f"{on_time_base:%H}:30")
    assert await fire_due(on_time_base + timedelta(seconds=1)) >= 1
    await drain()  # done now, long before its deadline (a day ahead)
    [job] = await schedule_jobs(on_time)
    assert job.status.value == "done"
    assert await check_deadlines(on_time_base + timedelta(minutes=31)) == 0
    await drain_alerts()
    assert len(notices(receiver, "late")) == 1


async def test_fires_missed_while_no_scheduler_ran_are_told_once_each(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any
) -> None:
    await make_destination(client, auth, webhook_body(receiver))
    base = next_whole_hour_a_day_ahead()
    sid = await hourly_with_owners(client, auth, base, missed_runs="skip")
    assert await fire_due(base + timedelta(hours=1, minutes=30)) == 0  # the 0:00 and 1:00 fires: missed
    assert await fire_due(base + timedelta(hours=1, minutes=31)) == 0  # nothing more to say
    await drain_alerts()
    missed = notices(receiver, "missed")
    assert len(missed) == 2 and {m["schedule_id"] for m in missed} == {sid}
    assert len({m["subject"] for m in missed}) == 2
    assert all(m["facts"]["Why"] == "no scheduler was running at its time" for m in missed)
    [digest] = [d.body for d in receiver.accepted]  # staged together: one message
    assert digest["notice"] == "digest" and digest["title"] == "2 owner notices (2 missed)"


async def test_a_fires_job_that_dies_tells_its_owners(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any
) -> None:
    await make_destination(client, auth, webhook_body(receiver))
    base = next_whole_hour_a_day_ahead()
    sid = await hourly_with_owners(
        client, auth, base, report_type="demo.flaky", params={"fail_times": 1, "permanent": True}
    )
    assert await fire_due(base + timedelta(seconds=1)) == 1
    await drain()
    await drain_alerts()
    [job] = await schedule_jobs(sid)
    [notice] = notices(receiver, "dead")
    assert notice["job_id"] == job.id and "is dead" in receiver.accepted[0].body["title"]
    [row] = await deliveries(client, auth, job.id)  # the job's page and API tell it as its digest went
    assert (row["kind"], row["status"], row["tries"]) == ("webhook", "sent", 1)


async def insert_done_runs(tenant: str, report_type: str, count: int, took_s: float) -> None:
    """`count` done jobs of the type that each ran `took_s` (the history a slow run is measured against)."""
    now = utcnow() - timedelta(hours=1)
    async with session_scope() as session:
        for n in range(count):
            started = now + timedelta(seconds=n)
            job = ReportJob(
                id=new_id(), tenant=tenant, report_type=report_type, params={}, status=JobStatus.DONE,
                max_attempts=1, timeout_s=60, created_at=started, updated_at=started, started_at=started,
                finished_at=started + timedelta(seconds=took_s),
            )  # fmt: skip
            session.add(job)


async def test_a_fires_job_much_slower_than_its_types_recent_runs_tells_its_owners(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any, env: Any
) -> None:
    await env.set(SLOW_RUN_FLOOR_S="0.5", SLOW_RUN_FACTOR="3")
    await make_destination(client, auth, webhook_body(receiver))
    await insert_done_runs("acme", "demo.sleep", 20, took_s=0.1)
    base = next_whole_hour_a_day_ahead()
    sid = await hourly_with_owners(client, auth, base, report_type="demo.sleep", params={"seconds": 1})
    assert await fire_due(base + timedelta(seconds=1)) == 1
    await drain()
    await drain_alerts()
    [notice] = notices(receiver, "slow")
    [job] = await schedule_jobs(sid)
    assert notice["job_id"] == job.id and notice["facts"]["Recent p95"].endswith("(20 runs)")


async def test_a_tenants_route_tells_of_any_dead_job_of_its_type_and_not_of_others(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any
) -> None:
    await make_destination(client, auth, webhook_body(receiver))
    route = {"report_type": "demo.flaky", "events": ["dead"], "notify_to": ["warehouse-hook"]}
    resp = await client.post("/v1/notify-routes", json=route, headers=auth)
    assert resp.status_code == 201, resp.text
    bad = await client.post("/v1/notify-routes", json={**route, "notify_to": ["nowhere"]}, headers=auth)
    assert bad.status_code == 422
    body = {"report_type": "demo.flaky", "params": {"fail_times": 1, "permanent": True}}
    job_id = (await client.post("/v1/jobs", json=body, headers=auth)).json()["id"]
    await drain()
    await drain_alerts()
    [notice] = notices(receiver, "dead")
    assert notice["job_id"] == job_id and notice["schedule_id"] is None
    listed = (await client.get("/v1/notify-routes", headers=auth)).json()["items"]
    assert [r["events"] for r in listed] == [["dead"]]
    assert (await client.delete(f"/v1/notify-routes/{listed[0]['id']}", headers=auth)).status_code == 204


async def test_a_tenants_slow_route_covers_a_job_of_no_schedule(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any, env: Any
) -> None:
    await env.set(SLOW_RUN_FLOOR_S="0.5", SLOW_RUN_FACTOR="3")
    await make_destination(client, auth, webhook_body(receiver))
    route = {"report_type": "demo.sleep", "events": ["slow"], "notify_to": ["warehouse-hook"]}
    assert (await client.post("/v1/notify-routes", json=route, headers=auth)).status_code == 201
    await insert_done_runs("acme", "demo.sleep", 20, took_s=0.1)
    body = {"report_type": "demo.sleep", "params": {"seconds": 1}}
    job_id = (await client.post("/v1/jobs", json=body, headers=auth)).json()["id"]
    await drain()
    await drain_alerts()
    [notice] = notices(receiver, "slow")
    assert notice["job_id"] == job_id and notice["schedule_id"] is None


async def test_a_failed_first_read_of_the_slow_routes_is_tried_again_on_the_next_start(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any, env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Adversarial review) a worker whose first read of the routes met a MySQL blip must not start the jobs
    of a long-standing slow route blind for the next 30 s."""
    await env.set(SLOW_RUN_FLOOR_S="0.5", SLOW_RUN_FACTOR="3")
    await make_destination(client, auth, webhook_body(receiver))
    route = {"report_type": "demo.sleep", "events": ["slow"], "notify_to": ["warehouse-hook"]}
    assert (await client.post("/v1/notify-routes", json=route, headers=auth)).status_code == 201
    await insert_done_runs("acme", "demo.sleep", 20, took_s=0.1)
    real_keys = DestinationRepository.slow_route_keys
    blips: list[bool] = []

    async def one_blip(self: DestinationRepository) -> Any:
        if not blips:
            blips.append(True)
            raise FailpointOutage("MySQL failing over")
        return await real_keys(self)

    monkeypatch.setattr(DestinationRepository, "slow_route_keys", one_blip)
    slow_routes.forget()
    await slow_routes.refresh_if_stale()  # a start during the blip
    body = {"report_type": "demo.sleep", "params": {"seconds": 1}}
    job_id = (await client.post("/v1/jobs", json=body, headers=auth)).json()["id"]
    await drain()
    await drain_alerts()
    assert blips and [n["job_id"] for n in notices(receiver, "slow")] == [job_id]


async def test_only_the_jobs_of_schedules_with_owners_start_with_their_success_staged(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any
) -> None:
    """A fire's job whose schedule names no owners (and no route covers) takes the plain success path (the
    group commit's driver batch); one whose schedule has owners starts with effects: its time is measured."""
    await make_destination(client, auth, webhook_body(receiver))
    base = next_whole_hour_a_day_ahead()
    owned = await hourly_with_owners(client, auth, base, report_type="demo.sleep", params={"seconds": 1})
    plain = await create_schedule(client, auth, name="plain", cron="0 * * * *", overlap="allow")  # no owners
    await make_due(plain["id"], base)
    assert await fire_due(base + timedelta(seconds=1)) == 2
    slow_routes.forget()
    await slow_routes.refresh_if_stale()
    [owned_job], [plain_job] = await schedule_jobs(owned), await schedule_jobs(plain["id"])

    owned_start = await attempts.start_attempt(owned_job.id, "w1")
    plain_start = await attempts.start_attempt(plain_job.id, "w1")

    assert isinstance(owned_start, attempts.Started) and isinstance(plain_start, attempts.Started)
    assert owned_start.key.has_effects and not plain_start.key.has_effects


async def test_the_deadline_check_reads_every_due_fires_job_in_one_statement(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any
) -> None:
    """(Review) `due_deadlines` read each fire's job with its own `session.get` (N+1)."""
    await make_destination(client, auth, webhook_body(receiver))
    base = next_whole_hour_a_day_ahead()
    deadline = f"{base + timedelta(minutes=30):%H:%M}"
    for n in range(3):
        await hourly_with_owners(client, auth, base, deadline=deadline, params={"rows": 1}, name=f"s{n}")
    assert await fire_due(base + timedelta(seconds=1)) == 3
    with statements_run() as seen:
        async with session_scope() as session:
            due = await DeliveryRepository(session).due_deadlines(base + timedelta(minutes=31), 100)
    assert len(due) == 3 and all(job is not None and job.id == fired.job_id for fired, _, job in due)
    assert sum(1 for sql in seen if "FROM report_jobs" in sql) == 1, seen
