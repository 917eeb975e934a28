"""Every guarantee holds for a declared type as for a Python one, one test per class: retry with backoff,
dead letter and alert, schedule, concurrency cap, ordering; plus the submit's 422s and the file's status."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime
from typing import Any

import httpx

from app.fairshare import service as fairshare
from tests.integration.reports.declared.conftest import Declared
from tests.utils.declared import csv_rows, sql_type, write_file
from tests.utils.fairshare import admin_call
from tests.utils.fakes.dingtalk import FakeDingTalk
from tests.utils.jobs import get_attempts, get_job, parse_ts, submit, submit_id
from tests.utils.keys import make_key
from tests.utils.schedules import create_schedule, schedule_jobs
from tests.utils.workers import drain, drain_alerts

SLEEPY = "SELECT SLEEP(:seconds) AS slept, :n AS n"
SLEEPY_PARAMS = {"seconds": {"type": "number", "maximum": 5}, "n": {"type": "integer"}}


async def until_status(client: httpx.AsyncClient, auth: dict[str, str], job_id: str, status: str) -> None:
    for _ in range(400):
        if (await get_job(client, auth, job_id))["status"] == status:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"job {job_id} never {status}")


async def spans(
    client: httpx.AsyncClient, auth: dict[str, str], ids: list[str]
) -> list[tuple[datetime, datetime]]:
    found = []
    for job_id in ids:
        [attempt] = [a for a in await get_attempts(client, auth, job_id) if a["outcome"] == "succeeded"]
        found.append((parse_ts(attempt["started_at"]), parse_ts(attempt["finished_at"])))
    return found


async def test_a_broken_declarations_file_keeps_the_previous_types(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared
) -> None:
    from app.reports.declared import declarations

    good = sql_type("dw.count", "SELECT COUNT(*) AS n FROM sales")
    await declared.use(good)
    names = {t["name"] for t in (await client.get("/v1/report-types", headers=auth)).json()}
    assert "dw.count" in names and "demo.csv" in names
    broken = good + sql_type("dw.bad", "SELECT * FROM sales WHERE region = :region")
    write_file(declared.path, broken)
    assert declarations.load_now() is False
    names = {t["name"] for t in (await client.get("/v1/report-types", headers=auth)).json()}
    assert "dw.count" in names and "dw.bad" not in names  # the previous good set, untouched
    admin = await make_key(scopes="admin")
    status = (await client.get("/v1/report-types/declarations", headers=admin)).json()
    assert status["types"] == [{"name": "dw.count", "kind": "sql"}]
    line = next(n for n, text in enumerate(broken.splitlines(), 1) if 'sql = """' in text and n > 5)
    assert status["error"] == {
        "file": str(declared.path),
        "line": line,
        "type": "dw.bad",
        "field": "sql",
        "reason": "names parameter :region that the params schema lacks (its properties: none)",
    }
    assert (await client.get("/v1/report-types/declarations", headers=auth)).status_code == 403
    job_id = await submit_id(client, auth, "dw.count")  # still served and run
    await drain()
    assert (await get_job(client, auth, job_id))["status"] == "done"


async def test_declared_params_get_the_same_422s_as_a_python_type_s(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared
) -> None:
    await declared.use(sql_type("dw.sleepy", SLEEPY, params=SLEEPY_PARAMS, required=("seconds",)))
    [listed] = [
        t for t in (await client.get("/v1/report-types", headers=auth)).json() if t["name"] == "dw.sleepy"
    ]
    assert listed["params_schema"]["properties"] == SLEEPY_PARAMS
    body = {"report_type": "dw.sleepy", "params": {"seconds": 9, "n": "x", "other": 1}}
    resp = await client.post("/v1/jobs", json=body, headers=auth)
    assert resp.status_code == 422 and resp.headers["content-type"] == "application/problem+json"
    assert [(e["loc"], e["type"]) for e in resp.json()["errors"]] == [
        (["body", "params", "other"], "extra_forbidden"),
        (["body", "params", "n"], "json_schema_type"),
        (["body", "params", "seconds"], "json_schema_maximum"),
    ]
    missing = await client.post("/v1/jobs", json={"report_type": "dw.sleepy", "params": {}}, headers=auth)
    assert [(e["loc"], e["type"]) for e in missing.json()["errors"]] == [
        (["body", "params", "seconds"], "missing")
    ]


async def test_a_declared_type_is_retried_with_backoff_until_its_source_answers(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared
) -> None:
    url = declared.sources["dw"]
    declared.mariadb.sql("DROP DATABASE IF EXISTS dw_late")
    declared.sources["late"] = url.rsplit("/", 1)[0] + "/dw_late"
    await declared.use(
        sql_type("late.one", "SELECT 1 AS one", source="late"), RETRY_DELAYS_S="[0.6, 0.6, 0.6]"
    )
    job_id = await submit_id(client, auth, "late.one")
    draining = asyncio.create_task(drain())
    await until_status(client, auth, job_id, "retrying")
    await asyncio.to_thread(
        declared.mariadb.sql, "CREATE DATABASE dw_late; GRANT SELECT ON dw_late.* TO 'report_ro'@'%'"
    )
    await draining
    job = await get_job(client, auth, job_id)
    assert job["status"] == "done" and job["attempt"] >= 2, job
    first, second = (await get_attempts(client, auth, job_id))[:2]
    assert first["error"]["type"] == "SourceUnavailable" and first["error"]["retryable"] is True
    assert (parse_ts(second["started_at"]) - parse_ts(first["finished_at"])).total_seconds() >= 0.55


async def test_a_dead_declared_job_gets_its_dead_letter_and_one_alert(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared, dingtalk: FakeDingTalk
) -> None:
    await declared.use(sql_type("dw.capped", "SELECT id FROM sales", max_rows=10))
    job_id = await submit_id(client, auth, "dw.capped")
    await drain()
    await drain_alerts()
    [letter] = (await client.get("/v1/dead-letters", headers=auth)).json()["items"]
    assert (letter["job_id"], letter["report_type"], letter["alert"]["status"]) == (
        job_id,
        "dw.capped",
        "sent",
    )
    assert len(dingtalk.accepted) == 1
    text = dingtalk.accepted[0].text
    assert job_id in text and "dw.capped" in text and "PermanentError" in text


async def test_a_schedule_of_a_declared_type_runs_its_job_with_the_fire_time_bound(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared
) -> None:
    await declared.use(sql_type("dw.fired", "SELECT :scheduled_for AS fired_for, :tenant AS tenant"))
    schedule = await create_schedule(client, auth, name="fired", report_type="dw.fired", params={})
    resp = await client.post(f"/v1/schedules/{schedule['id']}/trigger", headers=auth)
    assert resp.status_code in (200, 201, 202), resp.text
    [job] = await schedule_jobs(schedule["id"])
    assert job.scheduled_for is not None
    await drain()
    body = await get_job(client, auth, job.id)
    assert body["status"] == "done" and body["schedule_id"] == schedule["id"], body
    rows = csv_rows((await client.get(body["output"]["url"], headers=auth)).content)
    fired = job.scheduled_for.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    assert rows[1][1] == "acme" and rows[1][0].startswith(fired), (rows, fired)


async def test_a_declared_cap_holds_across_three_workers_and_its_priority_is_the_jobs_default(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared
) -> None:
    text = sql_type("dw.capped_sleep", SLEEPY, params=SLEEPY_PARAMS, max_concurrency=1, priority=7)
    await declared.use(text)
    admin = await make_key(scopes="admin")
    policy = await admin_call(client, admin, "GET", "/v1/report-types/dw.capped_sleep/policy")
    assert policy["max_concurrency"] == {"limit": 1, "source": "declared"}
    await fairshare.publish_policy()
    jobs = [await submit(client, auth, "dw.capped_sleep", seconds=0.3, n=i) for i in range(3)]
    assert {job["priority"] for job in jobs} == {7}  # the type's declared priority
    ids = [job["id"] for job in jobs]
    await drain(workers=3)
    windows = sorted(await spans(client, auth, ids))
    for (_, end_a), (start_b, _) in itertools.pairwise(windows):
        assert end_a <= start_b, "two jobs of a type capped at 1 ran at once"


async def test_declared_jobs_with_one_ordering_key_run_in_order_one_at_a_time(
    client: httpx.AsyncClient, auth: dict[str, str], declared: Declared
) -> None:
    await declared.use(sql_type("dw.ordered", SLEEPY, params=SLEEPY_PARAMS))
    ids = []
    for i in range(4):
        job: dict[str, Any] = await submit(
            client, auth, "dw.ordered", job={"ordering_key": "k"}, seconds=0.1, n=i
        )
        ids.append(job["id"])
    await drain(workers=3)
    windows = await spans(client, auth, ids)
    for (start_a, end_a), (start_b, _) in itertools.pairwise(windows):
        assert start_a < start_b and end_a <= start_b
