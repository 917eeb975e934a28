"""Fair-share administration over the API: tenants' weights, caps and pauses; report types' caps and pauses;
admin only, problem+json for every refusal (403, 404, 422), the policy document after every change.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.utils.fairshare import admin_call, pause_tenant, pause_type, resume_type
from tests.utils.keys import make_key
from tests.utils.problems import assert_problem

ADMIN_CALLS = [
    ("GET", "/v1/tenants", None),
    ("GET", "/v1/tenants/acme", None),
    ("PATCH", "/v1/tenants/acme", {"weight": 2}),
    ("POST", "/v1/tenants/acme/pause", None),
    ("POST", "/v1/tenants/acme/resume", None),
    ("GET", "/v1/fair-share/report-types", None),
    ("GET", "/v1/report-types/demo.csv/policy", None),
    ("PATCH", "/v1/report-types/demo.csv", {"max_concurrency": 2}),
    ("POST", "/v1/report-types/demo.csv/pause", None),
    ("POST", "/v1/report-types/demo.csv/resume", None),
]


@pytest.fixture
async def admin(env: Any) -> dict[str, str]:
    return await make_key(tenant="ops", scopes="admin")


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_CALLS)
async def test_every_fair_share_call_needs_the_admin_scope(
    client: httpx.AsyncClient, auth: dict[str, str], method: str, path: str, body: Any
) -> None:
    assert_problem(await client.request(method, path, json=body), 401)
    refused = assert_problem(await client.request(method, path, headers=auth, json=body), 403)
    assert "admin" in refused["detail"]


async def test_the_report_type_catalogue_stays_open_to_readers_without_the_policy(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    resp = await client.get("/v1/report-types", headers=auth)
    assert resp.status_code == 200, resp.text
    for item in resp.json():
        assert set(item) == {"name", "description", "params_schema", "timeout_s", "max_attempts"}


async def test_pausing_and_resuming_a_report_type_answers_its_policy(
    client: httpx.AsyncClient, admin: dict[str, str]
) -> None:
    paused = await pause_type(client, admin, "demo.csv")
    assert paused == {
        "name": "demo.csv",
        "priority": 5,
        "max_concurrency": {"limit": None, "source": None},
        "paused": True,
        "running": 0,
    }
    assert (await pause_type(client, admin, "demo.csv"))["paused"] is True  # again: no change, no error
    listed = await admin_call(client, admin, "GET", "/v1/fair-share/report-types")
    by_name = {item["name"]: item for item in listed["items"]}
    assert by_name["demo.csv"]["paused"] is True and by_name["demo.sleep"]["paused"] is False
    assert (await resume_type(client, admin, "demo.csv"))["paused"] is False
    policy = await admin_call(client, admin, "GET", "/v1/report-types/demo.csv/policy")
    assert policy["paused"] is False


async def test_a_report_type_cap_is_an_override_until_cleared_back_to_the_setting(
    client: httpx.AsyncClient, admin: dict[str, str], env: Any
) -> None:
    await env.set(REPORT_TYPE_MAX_CONCURRENCY='{"demo.sleep": 4}')
    path = "/v1/report-types/demo.sleep"
    policy = await admin_call(client, admin, "GET", f"{path}/policy")
    assert policy["max_concurrency"] == {"limit": 4, "source": "setting"}
    changed = await admin_call(client, admin, "PATCH", path, {"max_concurrency": 2})
    assert changed["max_concurrency"] == {"limit": 2, "source": "override"}
    assert (await admin_call(client, admin, "PATCH", path, {}))["max_concurrency"]["limit"] == 2
    cleared = await admin_call(client, admin, "PATCH", path, {"max_concurrency": None})
    assert cleared["max_concurrency"] == {"limit": 4, "source": "setting"}


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [("POST", "/pause", None), ("POST", "/resume", None), ("PATCH", "", {"max_concurrency": 1}),
     ("GET", "/policy", None)],
)  # fmt: skip
async def test_an_unknown_report_type_is_404(
    client: httpx.AsyncClient, admin: dict[str, str], method: str, suffix: str, body: Any
) -> None:
    resp = await client.request(method, f"/v1/report-types/no.such.type{suffix}", headers=admin, json=body)
    assert "no.such.type" in assert_problem(resp, 404)["detail"]


@pytest.mark.parametrize(
    "body",
    [{"max_concurrency": 0}, {"max_concurrency": "two"}, {"max_concurrency": 1.5}, {"paused": True}, []],
)
async def test_a_bad_report_type_patch_is_422_naming_the_field(
    client: httpx.AsyncClient, admin: dict[str, str], body: Any
) -> None:
    resp = await client.patch("/v1/report-types/demo.csv", headers=admin, json=body)
    assert assert_problem(resp, 422)["errors"], resp.text


async def test_a_tenant_without_a_policy_has_the_defaults_and_a_patch_changes_only_what_it_names(
    client: httpx.AsyncClient, admin: dict[str, str], env: Any
) -> None:
    await env.set(TENANT_MAX_RUNNING="8")
    fresh = await admin_call(client, admin, "GET", "/v1/tenants/acme")
    assert fresh == {
        "tenant": "acme",
        "weight": 1,
        "max_running": None,
        "effective_max_running": 8,
        "paused": False,
        "running": 0,
    }
    weighted = await admin_call(client, admin, "PATCH", "/v1/tenants/acme", {"weight": 3})
    assert (weighted["weight"], weighted["max_running"], weighted["effective_max_running"]) == (3, None, 8)
    capped = await admin_call(client, admin, "PATCH", "/v1/tenants/acme", {"max_running": 2})
    assert (capped["weight"], capped["max_running"], capped["effective_max_running"]) == (3, 2, 2)
    cleared = await admin_call(client, admin, "PATCH", "/v1/tenants/acme", {"max_running": None})
    assert (cleared["weight"], cleared["max_running"], cleared["effective_max_running"]) == (3, None, 8)
    await pause_tenant(client, admin, "beta")
    listed = await admin_call(client, admin, "GET", "/v1/tenants")
    assert [(t["tenant"], t["weight"], t["paused"]) for t in listed["items"]] == [
        ("acme", 3, False),
        ("beta", 1, True),
    ]
    resumed = await admin_call(client, admin, "POST", "/v1/tenants/beta/resume")
    assert resumed["paused"] is False


@pytest.mark.parametrize(
    "body",
    [{"weight": 0}, {"weight": 1001}, {"weight": None}, {"weight": "3"}, {"max_running": 0},
     {"max_running": -1}, {"tenant": "x"}, "weight=3"],
)  # fmt: skip
async def test_a_bad_tenant_patch_is_422(client: httpx.AsyncClient, admin: dict[str, str], body: Any) -> None:
    resp = await client.patch("/v1/tenants/acme", headers=admin, json=body)
    assert assert_problem(resp, 422)["errors"], resp.text


@pytest.mark.parametrize("tenant", ["Acme", "-acme", "a" * 65, "ac%20me", "acm%C3%A9"])
async def test_a_tenant_name_that_no_key_could_have_is_422(
    client: httpx.AsyncClient, admin: dict[str, str], tenant: str
) -> None:
    for method, suffix in (("GET", ""), ("PATCH", ""), ("POST", "/pause"), ("POST", "/resume")):
        body = {"weight": 2} if method == "PATCH" else None
        resp = await client.request(method, f"/v1/tenants/{tenant}{suffix}", headers=admin, json=body)
        assert assert_problem(resp, 422)["errors"][0]["loc"] == ["path", "tenant"], resp.text
