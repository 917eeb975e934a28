"""The HTTP contract (CONTRACT.md) for invalid requests: every malformed body, field, run_at and query is a
422 problem+json listing each error with its loc, and creates no job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.utils.api_contract import CSV, all_jobs, assert_no_job_created, iso
from tests.utils.jobs import post_job
from tests.utils.problems import assert_problem


def assert_validation(resp: httpx.Response) -> list[dict[str, Any]]:
    body = assert_problem(resp, 422)
    errors = body.get("errors")
    assert isinstance(errors, list) and errors, body
    for err in errors:
        assert {"loc", "msg", "type"} <= set(err), err
    return errors


async def test_malformed_json_is_422_with_errors(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    resp = await client.post(
        "/v1/jobs",
        content=b'{"report_type": "demo.csv",',
        headers={**auth, "Content-Type": "application/json"},
    )
    assert_validation(resp)
    await assert_no_job_created(client, auth)


async def test_empty_body_is_422_with_errors(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    resp = await client.post("/v1/jobs", content=b"", headers={**auth, "Content-Type": "application/json"})
    assert_validation(resp)
    await assert_no_job_created(client, auth)


@pytest.mark.parametrize(
    "body",
    [b"null", b"[]", b'"demo.csv"', b"42"],
    ids=["null", "array", "string", "number"],
)
async def test_json_body_that_is_not_an_object_is_422(
    client: httpx.AsyncClient, auth: dict[str, str], body: bytes
) -> None:
    resp = await client.post("/v1/jobs", content=body, headers={**auth, "Content-Type": "application/json"})
    assert_validation(resp)
    await assert_no_job_created(client, auth)


UNDECODABLE_BODIES = {
    "invalid-utf8": b'{"report_type": "demo.\xff", "params": {}}',
    "nested-too-deep": b'{"report_type": "demo.csv", "params": {"a": ' + b"[" * 5000 + b"]" * 5000 + b"}}",
    "integer-over-4300-digits": b'{"report_type": "demo.csv", "params": {"rows": ' + b"9" * 5000 + b"}}",
}


@pytest.mark.parametrize("name", list(UNDECODABLE_BODIES))
async def test_undecodable_json_body_is_422_with_errors(
    client: httpx.AsyncClient, auth: dict[str, str], name: str
) -> None:
    resp = await client.post(
        "/v1/jobs", content=UNDECODABLE_BODIES[name], headers={**auth, "Content-Type": "application/json"}
    )
    assert_validation(resp)


@pytest.mark.parametrize("name", list(UNDECODABLE_BODIES))
async def test_undecodable_json_body_is_a_4xx_problem_and_creates_nothing(
    client: httpx.AsyncClient, auth: dict[str, str], name: str
) -> None:
    resp = await client.post(
        "/v1/jobs", content=UNDECODABLE_BODIES[name], headers={**auth, "Content-Type": "application/json"}
    )
    assert 400 <= resp.status_code < 500, resp.text
    assert_problem(resp, resp.status_code)
    await assert_no_job_created(client, auth)


async def test_params_not_an_object_is_422(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    for params in ([1, 2], "rows=5", 5):
        resp = await client.post("/v1/jobs", json={"report_type": "demo.csv", "params": params}, headers=auth)
        errors = assert_validation(resp)
        assert any(e["loc"][:2] == ["body", "params"] for e in errors), errors
    await assert_no_job_created(client, auth)


async def test_unknown_report_type_is_422_at_body_report_type(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    resp = await client.post("/v1/jobs", json={"report_type": "nope.nothing", "params": {}}, headers=auth)
    errors = assert_validation(resp)
    assert ["body", "report_type"] in [e["loc"] for e in errors], errors
    await assert_no_job_created(client, auth)


async def test_params_failing_the_type_schema_is_422_at_body_params_field(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    resp = await client.post(
        "/v1/jobs", json={"report_type": "demo.csv", "params": {"rows": 0}}, headers=auth
    )
    errors = assert_validation(resp)
    assert any(e["loc"][:3] == ["body", "params", "rows"] for e in errors), errors
    resp = await client.post(
        "/v1/jobs", json={"report_type": "demo.csv", "params": {"rows": 5, "bogus": 1}}, headers=auth
    )
    errors = assert_validation(resp)
    assert any(e["loc"][:3] == ["body", "params", "bogus"] for e in errors), errors
    resp = await client.post("/v1/jobs", json={"report_type": "demo.csv", "params": {}}, headers=auth)
    errors = assert_validation(resp)
    assert any(e["loc"][:3] == ["body", "params", "rows"] for e in errors), errors
    await assert_no_job_created(client, auth)


async def test_unknown_top_level_field_is_422(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    resp = await client.post("/v1/jobs", json={**CSV, "urgency": 9}, headers=auth)
    errors = assert_validation(resp)
    assert any(e["loc"][:2] == ["body", "urgency"] for e in errors), errors
    await assert_no_job_created(client, auth)


async def test_run_at_in_the_past_is_422(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    past = datetime.now(UTC) - timedelta(hours=1)
    resp = await client.post("/v1/jobs", json={**CSV, "run_at": iso(past)}, headers=auth)
    errors = assert_validation(resp)
    assert ["body", "run_at"] in [e["loc"] for e in errors], errors
    await assert_no_job_created(client, auth)


async def test_run_at_31_days_ahead_is_422(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    later = datetime.now(UTC) + timedelta(days=31)
    resp = await client.post("/v1/jobs", json={**CSV, "run_at": iso(later)}, headers=auth)
    errors = assert_validation(resp)
    assert ["body", "run_at"] in [e["loc"] for e in errors], errors
    await assert_no_job_created(client, auth)


async def test_run_at_without_timezone_is_422(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    naive = (datetime.now(UTC) + timedelta(hours=1)).replace(tzinfo=None)
    resp = await client.post("/v1/jobs", json={**CSV, "run_at": naive.isoformat()}, headers=auth)
    errors = assert_validation(resp)
    assert any(e["loc"][:2] == ["body", "run_at"] for e in errors), errors
    await assert_no_job_created(client, auth)


async def test_run_at_in_the_near_future_is_scheduled(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    """The positive control for the run_at 422s: one hour ahead is accepted as `scheduled`."""
    later = datetime.now(UTC) + timedelta(hours=1)
    job = await post_job(client, auth, {**CSV, "run_at": iso(later)})
    assert job["status"] == "scheduled"
    assert job["run_at"] is not None and job["run_at"].endswith("Z")


async def test_several_bad_fields_are_all_listed(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    past = datetime.now(UTC) - timedelta(days=1)
    resp = await client.post(
        "/v1/jobs",
        json={"report_type": "demo.csv", "params": {"rows": 0}, "run_at": iso(past)},
        headers=auth,
    )
    locs = [e["loc"] for e in assert_validation(resp)]
    assert ["body", "run_at"] in locs and any(loc[:3] == ["body", "params", "rows"] for loc in locs), locs
    await assert_no_job_created(client, auth)


@pytest.mark.parametrize(
    ("params", "loc"),
    [
        ({"limit": 201}, ["query", "limit"]),
        ({"limit": 0}, ["query", "limit"]),
        ({"limit": "ten"}, ["query", "limit"]),
        ({"cursor": "not-a-cursor"}, ["query", "cursor"]),
        ({"cursor": "QUJD"}, ["query", "cursor"]),  # valid base64 of "ABC", not a job id
        ({"status": "bogus"}, ["query", "status"]),
        ({"created_after": "yesterday"}, ["query", "created_after"]),
        ({"created_before": "2026-01-01T00:00:00"}, ["query", "created_before"]),
    ],
)
async def test_bad_list_query_is_422_naming_the_parameter(
    client: httpx.AsyncClient, auth: dict[str, str], params: dict[str, Any], loc: list[str]
) -> None:
    errors = assert_validation(await client.get("/v1/jobs", params=params, headers=auth))
    assert any(e["loc"][:2] == loc for e in errors), errors
    await assert_no_job_created(client, auth)


async def test_wait_over_30_is_422(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    job = await post_job(client, auth, CSV)
    for wait in ("31", "-1", "soon"):
        resp = await client.get(f"/v1/jobs/{job['id']}", params={"wait": wait}, headers=auth)
        errors = assert_validation(resp)
        assert any(e["loc"][:2] == ["query", "wait"] for e in errors), errors
    assert [j["id"] for j in await all_jobs(client, auth)] == [job["id"]]
