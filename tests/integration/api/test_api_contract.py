"""The HTTP contract (CONTRACT.md) on the real app, MariaDB and Redis: errors, auth, tenants, listing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from app.auth import service
from tests.utils.jobs import post_job, submit
from tests.utils.keys import make_key
from tests.utils.problems import BOGUS_ID, PROBLEM, assert_problem

CSV = {"report_type": "demo.csv", "params": {"rows": 5}}


def assert_validation(resp: httpx.Response) -> list[dict[str, Any]]:
    body = assert_problem(resp, 422)
    errors = body.get("errors")
    assert isinstance(errors, list) and errors, body
    for err in errors:
        assert {"loc", "msg", "type"} <= set(err), err
    return errors


async def all_jobs(client: httpx.AsyncClient, headers: dict[str, str]) -> list[dict[str, Any]]:
    resp = await client.get("/v1/jobs", params={"limit": 200}, headers=headers)
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


def iso(value: datetime) -> str:
    return value.isoformat()


# ---- 401 ------------------------------------------------------------------------------------------


async def test_missing_key_is_401_problem_json(client: httpx.AsyncClient, env: Any) -> None:
    resp = await client.get("/v1/jobs")
    assert_problem(resp, 401)
    assert resp.headers.get("www-authenticate", "").lower().startswith("bearer")


async def test_garbage_key_is_401_problem_json(client: httpx.AsyncClient, env: Any) -> None:
    for value in ("Bearer not-a-key", "Bearer ro_" + "x" * 43, "Bearer", "Bearer    ", "garbage"):
        assert_problem(await client.get("/v1/jobs", headers={"Authorization": value}), 401)


async def test_basic_scheme_is_401_problem_json(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    raw = auth["Authorization"].removeprefix("Bearer ")
    resp = await client.get("/v1/jobs", headers={"Authorization": f"Basic {raw}"})
    assert_problem(resp, 401)
    resp = await client.get("/v1/jobs", auth=("user", raw))
    assert_problem(resp, 401)


async def test_revoked_key_is_401_problem_json(client: httpx.AsyncClient, env: Any) -> None:
    key, raw = await service.create_api_key("acme", ["jobs:read", "jobs:write"])
    headers = {"Authorization": f"Bearer {raw}"}
    assert (await client.get("/v1/jobs", headers=headers)).status_code == 200
    assert await service.revoke_api_key(key.id) is True
    assert_problem(await client.get("/v1/jobs", headers=headers), 401)
    assert_problem(await client.post("/v1/jobs", json=CSV, headers=headers), 401)


async def test_missing_key_with_malformed_json_is_401_before_validation(
    client: httpx.AsyncClient, env: Any
) -> None:
    resp = await client.post("/v1/jobs", content=b"{not json", headers={"Content-Type": "application/json"})
    assert_problem(resp, 401)


async def test_bad_key_on_an_unknown_job_is_401_not_404(client: httpx.AsyncClient, env: Any) -> None:
    resp = await client.get(f"/v1/jobs/{BOGUS_ID}", headers={"Authorization": "Bearer nope"})
    assert_problem(resp, 401)


# ---- 403 ------------------------------------------------------------------------------------------


async def test_read_only_key_posting_a_job_is_403(client: httpx.AsyncClient, env: Any) -> None:
    reader = await make_key("acme", "jobs:read")
    assert_problem(await client.post("/v1/jobs", json=CSV, headers=reader), 403)


async def test_read_only_key_posting_malformed_json_is_403_before_validation(
    client: httpx.AsyncClient, env: Any
) -> None:
    reader = await make_key("acme", "jobs:read")
    resp = await client.post(
        "/v1/jobs", content=b"{not json", headers={**reader, "Content-Type": "application/json"}
    )
    assert_problem(resp, 403)


async def test_write_only_key_reading_a_job_is_403(client: httpx.AsyncClient, env: Any) -> None:
    writer = await make_key("acme", "jobs:write")
    job = await post_job(client, writer, CSV)
    assert_problem(await client.get(f"/v1/jobs/{job['id']}", headers=writer), 403)
    assert_problem(await client.get("/v1/jobs", headers=writer), 403)
    # Missing scope is 403 before any lookup: an unknown id is 403 too, not 404.
    assert_problem(await client.get(f"/v1/jobs/{BOGUS_ID}", headers=writer), 403)


# ---- 422 ------------------------------------------------------------------------------------------


async def assert_no_job_created(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    assert await all_jobs(client, auth) == []


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


# ---- 413 ------------------------------------------------------------------------------------------


def big_body(size: int) -> bytes:
    body = json.dumps({"report_type": "demo.csv", "params": {"rows": 5, "pad": "x" * size}}).encode()
    assert len(body) > size
    return body


async def test_body_over_max_body_bytes_with_content_length_is_413(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(MAX_BODY_BYTES=1024)
    resp = await client.post(
        "/v1/jobs", content=big_body(2048), headers={**auth, "Content-Type": "application/json"}
    )
    assert "content-length" in {k.lower() for k in resp.request.headers}
    assert_problem(resp, 413)
    await assert_no_job_created(client, auth)


async def test_chunked_body_over_max_body_bytes_is_413(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(MAX_BODY_BYTES=1024)
    payload = big_body(4096)

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(payload), 256):
            yield payload[i : i + 256]

    resp = await client.post(
        "/v1/jobs", content=chunks(), headers={**auth, "Content-Type": "application/json"}
    )
    assert "content-length" not in {k.lower() for k in resp.request.headers}
    assert_problem(resp, 413)
    await assert_no_job_created(client, auth)


async def test_oversized_body_without_a_key_is_401_not_413(client: httpx.AsyncClient, env: Any) -> None:
    await env.set(MAX_BODY_BYTES=1024)
    resp = await client.post("/v1/jobs", content=big_body(2048), headers={"Content-Type": "application/json"})
    assert_problem(resp, 401)


async def test_oversized_body_with_a_read_only_key_is_403_not_413(
    client: httpx.AsyncClient, env: Any
) -> None:
    await env.set(MAX_BODY_BYTES=1024)
    reader = await make_key("acme", "jobs:read")
    resp = await client.post(
        "/v1/jobs", content=big_body(2048), headers={**reader, "Content-Type": "application/json"}
    )
    assert_problem(resp, 403)


async def test_body_under_max_body_bytes_is_accepted(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(MAX_BODY_BYTES=1024)
    payload = json.dumps(CSV).encode()

    async def chunks() -> AsyncIterator[bytes]:
        yield payload

    resp = await client.post(
        "/v1/jobs", content=chunks(), headers={**auth, "Content-Type": "application/json"}
    )
    assert resp.status_code == 202, resp.text


# ---- 404 / 405 ------------------------------------------------------------------------------------


async def test_unknown_job_id_is_404_problem_json(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    for suffix in ("", "/attempts", "/output"):
        assert_problem(await client.get(f"/v1/jobs/{BOGUS_ID}{suffix}", headers=auth), 404)


async def test_path_traversal_id_is_404_problem_json(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    for path in (
        "/v1/jobs/..%2F..%2Fetc%2Fpasswd",
        "/v1/jobs/..%2F..%2Fetc%2Fpasswd/output",
        "/v1/jobs/%2E%2E",
    ):
        resp = await client.get(path, headers=auth)
        body = assert_problem(resp, 404)
        assert "root:" not in resp.text and "passwd" not in body["title"]


async def test_10kb_id_is_404_problem_json(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    long_id = "A" * 10_000
    for suffix in ("", "/attempts", "/output"):
        resp = await client.get(f"/v1/jobs/{long_id}{suffix}", headers=auth)
        assert_problem(resp, 404)


async def test_10kb_id_is_a_short_problem_json_never_a_500(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    long_id = "A" * 10_000
    for suffix in ("", "/attempts", "/output"):
        resp = await client.get(f"/v1/jobs/{long_id}{suffix}", headers=auth)
        assert resp.status_code in (404, 422), resp.text
        assert_problem(resp, resp.status_code)
        assert len(resp.content) < 2000 and long_id not in resp.text


async def test_any_non_ulid_id_up_to_200_chars_is_404(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    for job_id in ("A" * 27, "A" * 200, "not-a-ulid", "0" * 25):
        assert_problem(await client.get(f"/v1/jobs/{job_id}", headers=auth), 404)


async def test_unicode_id_is_404_problem_json(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    for job_id in ("日本語", "01JD3Z7Q8J5Q0V6W2XKX4N9M1é", "\U0001f4a5"):
        assert_problem(await client.get(f"/v1/jobs/{job_id}", headers=auth), 404)


async def test_lowercase_id_of_an_existing_job_is_not_an_error_500(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job = await post_job(client, auth, CSV)
    resp = await client.get(f"/v1/jobs/{job['id'].lower()}", headers=auth)
    assert resp.status_code in (200, 404), resp.text


async def test_unknown_route_under_v1_is_404_problem_json(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    assert_problem(await client.get("/v1/nothing-here", headers=auth), 404)
    assert_problem(await client.get("/v1/jobs/a/b/c", headers=auth), 404)


async def test_unknown_route_under_v1_without_a_key_is_401(client: httpx.AsyncClient, env: Any) -> None:
    assert_problem(await client.get("/v1/nothing-here"), 401)


async def test_unknown_route_outside_v1_is_404_problem_json(client: httpx.AsyncClient, env: Any) -> None:
    assert_problem(await client.get("/nothing-here"), 404)
    assert_problem(await client.get("/v2/jobs"), 404)


async def test_wrong_method_is_405_problem_json(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    resp = await client.delete("/v1/jobs", headers=auth)
    assert_problem(resp, 405)
    assert resp.headers.get("allow")
    assert_problem(await client.put(f"/v1/jobs/{BOGUS_ID}", json={}, headers=auth), 405)
    assert_problem(await client.post("/healthz"), 405)


async def test_missing_key_behind_a_root_path_is_401(env: Any) -> None:
    from app.application import create_app

    transport = httpx.ASGITransport(app=create_app(), root_path="/api", raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        assert (await c.get("/api/healthz")).status_code == 200
        assert_problem(await c.get("/api/v1/jobs"), 401)


# ---- tenants ----------------------------------------------------------------------------------------


async def test_job_of_another_tenant_is_404_everywhere(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job = await post_job(client, auth, CSV)
    other = await make_key("globex", "jobs:read,jobs:write")
    for suffix in ("", "/attempts", "/output"):
        assert_problem(await client.get(f"/v1/jobs/{job['id']}{suffix}", headers=other), 404)
    resp = await client.get(f"/v1/jobs/{job['id']}", params={"wait": 0.1}, headers=other)
    assert_problem(resp, 404)
    assert await all_jobs(client, other) == []
    assert [j["id"] for j in await all_jobs(client, auth)] == [job["id"]]


async def test_not_found_for_another_tenant_looks_like_a_missing_job(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    """Existence is not revealed: same status, title and body shape as an id that was never created."""
    job = await post_job(client, auth, CSV)
    other = await make_key("globex", "jobs:read")
    theirs = assert_problem(await client.get(f"/v1/jobs/{job['id']}", headers=other), 404)
    missing = assert_problem(await client.get(f"/v1/jobs/{BOGUS_ID}", headers=other), 404)
    assert theirs["title"] == missing["title"] and theirs["type"] == missing["type"]
    assert theirs["detail"].replace(job["id"], "ID") == missing["detail"].replace(BOGUS_ID, "ID")


async def test_admin_key_of_another_tenant_sees_the_job(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job = await post_job(client, auth, CSV)
    admin = await make_key("ops", "admin")
    resp = await client.get(f"/v1/jobs/{job['id']}", headers=admin)
    assert resp.status_code == 200 and resp.json()["id"] == job["id"]
    assert (await client.get(f"/v1/jobs/{job['id']}/attempts", headers=admin)).json() == []
    assert [j["id"] for j in await all_jobs(client, admin)] == [job["id"]]


# ---- 409 ------------------------------------------------------------------------------------------


async def test_output_before_done_is_409_problem_json(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job = await post_job(client, auth, CSV)
    assert job["status"] == "pending" and job["output"] is None
    assert_problem(await client.get(f"/v1/jobs/{job['id']}/output", headers=auth), 409)


# ---- listing --------------------------------------------------------------------------------------


async def fetch_page(
    client: httpx.AsyncClient, auth: dict[str, str], **params: Any
) -> tuple[list[str], str | None]:
    resp = await client.get("/v1/jobs", params=params, headers=auth)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"items", "next_cursor"}
    return [j["id"] for j in body["items"]], body["next_cursor"]


async def test_listing_pages_through_all_jobs_newest_first(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    created = [(await post_job(client, auth, CSV))["id"] for _ in range(7)]
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        ids, cursor = await fetch_page(client, auth, **params)
        pages += 1
        assert len(ids) <= 3
        seen.extend(ids)
        if cursor is None:
            break
        assert pages < 10
    assert pages == 3
    assert seen == list(reversed(created))


async def test_listing_with_exactly_a_full_last_page_ends_with_null_cursor(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    created = [(await post_job(client, auth, CSV))["id"] for _ in range(6)]
    first, cursor = await fetch_page(client, auth, limit=3)
    assert cursor is not None
    second, cursor = await fetch_page(client, auth, limit=3, cursor=cursor)
    assert cursor is None
    assert first + second == list(reversed(created))


async def test_listing_has_no_duplicate_or_skip_while_jobs_arrive(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    original = [(await post_job(client, auth, CSV))["id"] for _ in range(7)]
    seen: list[str] = []
    cursor: str | None = None
    arrived: list[str] = []
    while True:
        params: dict[str, Any] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        ids, cursor = await fetch_page(client, auth, **params)
        seen.extend(ids)
        arrived += [(await post_job(client, auth, CSV))["id"] for _ in range(2)]
        if cursor is None:
            break
    assert len(seen) == len(set(seen))
    assert [i for i in seen if i in original] == list(reversed(original))
    assert not set(seen) & set(arrived)
    ids, _ = await fetch_page(client, auth, limit=200)
    assert ids[: len(arrived)] == list(reversed(arrived))


async def test_listing_filters_by_status(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    pending = await post_job(client, auth, CSV)
    later = datetime.now(UTC) + timedelta(hours=1)
    scheduled = await post_job(client, auth, {**CSV, "run_at": iso(later)})
    assert (await fetch_page(client, auth, status="pending"))[0] == [pending["id"]]
    assert (await fetch_page(client, auth, status="scheduled"))[0] == [scheduled["id"]]
    assert (await fetch_page(client, auth, status="done"))[0] == []
    both, _ = await fetch_page(client, auth, status=["pending", "scheduled"])
    assert both == [scheduled["id"], pending["id"]]


async def test_listing_filters_by_report_type(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    csv_job = await post_job(client, auth, CSV)
    sleep_job = await submit(client, auth, "demo.sleep", seconds=1)
    assert (await fetch_page(client, auth, report_type="demo.csv"))[0] == [csv_job["id"]]
    assert (await fetch_page(client, auth, report_type="demo.sleep"))[0] == [sleep_job["id"]]
    assert (await fetch_page(client, auth, report_type="demo.nothing"))[0] == []


async def test_listing_filters_by_creation_time(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    jobs = [await post_job(client, auth, CSV) for _ in range(5)]
    ids = [j["id"] for j in jobs]
    pivot = jobs[2]["created_at"]
    after, _ = await fetch_page(client, auth, created_after=pivot)
    assert after == list(reversed(ids[2:]))
    before, _ = await fetch_page(client, auth, created_before=pivot)
    assert before == list(reversed(ids[:2]))
    window, _ = await fetch_page(client, auth, created_after=jobs[1]["created_at"], created_before=pivot)
    assert window == [ids[1]]
    future = iso(datetime.now(UTC) + timedelta(days=1))
    assert (await fetch_page(client, auth, created_after=future))[0] == []
    # Filters combine with pagination.
    first, cursor = await fetch_page(client, auth, created_after=jobs[1]["created_at"], limit=2)
    assert cursor is not None
    second, cursor = await fetch_page(
        client, auth, created_after=jobs[1]["created_at"], limit=2, cursor=cursor
    )
    assert cursor is None
    assert first + second == list(reversed(ids[1:]))


# ---- report types, health, docs, metrics --------------------------------------------------------


async def test_report_types_lists_the_demo_types(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    resp = await client.get("/v1/report-types", headers=auth)
    assert resp.status_code == 200, resp.text
    types = {t["name"]: t for t in resp.json()}
    assert {"demo.csv", "demo.sleep", "demo.flaky"} <= set(types)
    for item in types.values():
        assert set(item) == {"name", "description", "params_schema", "timeout_s", "max_attempts"}
        assert item["params_schema"]["type"] == "object"
        assert item["timeout_s"] == 5
        assert item["max_attempts"] == 4
    assert "rows" in types["demo.csv"]["params_schema"]["properties"]
    assert "rows" in types["demo.csv"]["params_schema"]["required"]
    assert "seconds" in types["demo.sleep"]["params_schema"]["properties"]
    assert {"fail_times", "permanent"} <= set(types["demo.flaky"]["params_schema"]["properties"])


async def test_report_types_needs_a_key(client: httpx.AsyncClient, env: Any) -> None:
    assert_problem(await client.get("/v1/report-types"), 401)


async def test_healthz_is_200_without_a_key(client: httpx.AsyncClient, env: Any) -> None:
    resp = await client.get("/healthz")
    assert resp.status_code == 200
    assert resp.json()["status"] == "ok"


async def test_readyz_is_200_with_database_and_redis_ok(client: httpx.AsyncClient, env: Any) -> None:
    resp = await client.get("/readyz")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["status"] == "ok"
    assert body["checks"] == {"database": "ok", "redis": "ok"}


CDNS = (
    "cdn.jsdelivr.net",
    "unpkg.com",
    "fastapi.tiangolo.com",
    "cdnjs.cloudflare.com",
    "fonts.googleapis.com",
)


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
async def test_docs_are_served_offline_without_any_cdn(
    client: httpx.AsyncClient, env: Any, path: str
) -> None:
    resp = await client.get(path)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/html")
    page = resp.text
    assert "<html" in page.lower()
    for cdn in CDNS:
        assert cdn not in page, cdn
    assert "openapi.json" in page


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
async def test_docs_assets_are_served_locally(client: httpx.AsyncClient, env: Any, path: str) -> None:
    import re

    page = (await client.get(path)).text
    assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css))"', page)
    assert assets, page
    for asset in assets:
        assert asset.startswith("/"), asset
        resp = await client.get(asset)
        assert resp.status_code == 200, asset


async def test_openapi_declares_bearer_idempotency_header_and_problem_responses(
    client: httpx.AsyncClient, env: Any
) -> None:
    resp = await client.get("/openapi.json")
    assert resp.status_code == 200
    doc = resp.json()
    schemes = doc["components"]["securitySchemes"]
    assert any(s.get("type") == "http" and s.get("scheme", "").lower() == "bearer" for s in schemes.values())
    post = doc["paths"]["/v1/jobs"]["post"]
    assert post.get("security"), post
    headers = [p for p in post["parameters"] if p["in"] == "header"]
    assert [p["name"] for p in headers] == ["Idempotency-Key"]
    for code in ("401", "422"):
        assert PROBLEM in post["responses"][code]["content"], (code, post["responses"][code])
    assert "202" in post["responses"]
    problem = doc["components"]["schemas"]["Problem"]
    assert {"type", "title", "status", "detail"} <= set(problem["required"])


async def test_openapi_declares_every_list_query_parameter(client: httpx.AsyncClient, env: Any) -> None:
    doc = (await client.get("/openapi.json")).json()
    get_list = doc["paths"]["/v1/jobs"]["get"]
    names = {p["name"] for p in get_list["parameters"] if p["in"] == "query"}
    assert {"status", "report_type", "created_after", "created_before", "limit", "cursor"} <= names
    get_one = doc["paths"]["/v1/jobs/{job_id}"]["get"]
    assert "wait" in {p["name"] for p in get_one["parameters"] if p["in"] == "query"}


async def test_metrics_answers_200_prometheus_text(client: httpx.AsyncClient, env: Any) -> None:
    resp = await client.get("/metrics")
    assert resp.status_code == 200, (resp.status_code, resp.headers)
    assert resp.headers["content-type"].startswith("text/plain")
    assert "# TYPE" in resp.text


async def test_metrics_followed_redirect_answers_200_text(client: httpx.AsyncClient, env: Any) -> None:
    resp = await client.get("/metrics", follow_redirects=True)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    assert "# TYPE" in resp.text


async def test_405_allow_header_lists_every_supported_method(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    resp = await client.delete("/v1/jobs", headers=auth)
    assert resp.status_code == 405
    allowed = {m.strip() for m in resp.headers.get("allow", "").split(",")}
    assert {"GET", "POST"} <= allowed
