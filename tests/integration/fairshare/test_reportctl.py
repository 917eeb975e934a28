"""`reportctl tenants …`, `reportctl types …` and `reportctl submit --priority` against a real API process:
each prints the policy (or a table), a refusal exits 1 with the problem printed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.utils.keys import make_key
from tests.utils.live_api import live_api, reportctl

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def api_url(base_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with live_api(tmp_path_factory.mktemp("api-logs")) as url:
        yield url


@pytest.fixture
async def admin_key(env: Any) -> str:
    return (await make_key(tenant="ops", scopes="admin"))["Authorization"].removeprefix("Bearer ")


async def ok(api_url: str, key: str, *args: str) -> str:
    code, out, err = await reportctl(api_url, key, *args)
    assert code == 0, f"{args}: {out}{err}"
    return out


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip()]


async def test_tenant_commands_change_and_show_the_policy(api_url: str, admin_key: str) -> None:
    weighted = json.loads(await ok(api_url, admin_key, "tenants", "set-weight", "acme", "3"))
    assert (weighted["tenant"], weighted["weight"]) == ("acme", 3)
    capped = json.loads(await ok(api_url, admin_key, "tenants", "set-cap", "acme", "2"))
    assert (capped["weight"], capped["max_running"], capped["effective_max_running"]) == (3, 2, 2)
    assert json.loads(await ok(api_url, admin_key, "tenants", "pause", "beta"))["paused"] is True

    header, *rows = table(await ok(api_url, admin_key, "tenants", "list"))
    assert header == ["TENANT", "WEIGHT", "MAX_RUNNING", "EFFECTIVE", "PAUSED", "RUNNING"]
    assert rows == [["acme", "3", "2", "2", "no", "0"], ["beta", "1", "-", "-", "yes", "0"]]

    cleared = json.loads(await ok(api_url, admin_key, "tenants", "clear-cap", "acme"))
    assert (cleared["weight"], cleared["max_running"]) == (3, None)
    assert json.loads(await ok(api_url, admin_key, "tenants", "resume", "beta"))["paused"] is False
    shown = json.loads(await ok(api_url, admin_key, "tenants", "show", "acme"))
    assert (shown["weight"], shown["max_running"], shown["paused"]) == (3, None, False)


async def test_type_commands_change_and_list_caps_and_pauses(api_url: str, admin_key: str) -> None:
    assert json.loads(await ok(api_url, admin_key, "types", "pause", "demo.csv"))["paused"] is True
    capped = json.loads(await ok(api_url, admin_key, "types", "set-cap", "demo.sleep", "2"))
    assert capped["max_concurrency"] == {"limit": 2, "source": "override"}

    header, *rows = table(await ok(api_url, admin_key, "types", "list"))
    assert header == ["NAME", "PRIORITY", "MAX_CONCURRENCY", "SOURCE", "PAUSED", "RUNNING"]
    by_name = {row[0]: row[1:] for row in rows}
    assert by_name["demo.csv"] == ["5", "-", "-", "yes", "0"]
    assert by_name["demo.sleep"] == ["5", "2", "override", "no", "0"]

    cleared = json.loads(await ok(api_url, admin_key, "types", "clear-cap", "demo.sleep"))
    assert cleared["max_concurrency"] == {"limit": None, "source": None}
    assert json.loads(await ok(api_url, admin_key, "types", "resume", "demo.csv"))["paused"] is False
    assert json.loads(await ok(api_url, admin_key, "types", "show", "demo.csv"))["paused"] is False


async def test_refusals_exit_1_printing_the_problem(api_url: str, admin_key: str) -> None:
    reader = (await make_key(scopes="jobs:read,jobs:write"))["Authorization"].removeprefix("Bearer ")
    code, out, _ = await reportctl(api_url, reader, "tenants", "list")
    assert code == 1 and json.loads(out)["status"] == 403
    code, out, _ = await reportctl(api_url, admin_key, "types", "pause", "no.such.type")
    assert code == 1 and json.loads(out)["status"] == 404
    code, out, _ = await reportctl(api_url, admin_key, "tenants", "pause", "Not A Tenant")
    assert code == 1 and json.loads(out)["status"] == 422
    code, _, err = await reportctl(api_url, admin_key, "tenants", "set-weight", "acme", "0")
    assert code == 2 and "weight" in err.lower()  # refused before any request


async def test_submit_with_priority_shows_it_and_what_the_job_waits_for(
    api_url: str, admin_key: str, tmp_path: Path
) -> None:
    key = (await make_key())["Authorization"].removeprefix("Bearer ")
    await ok(api_url, admin_key, "types", "pause", "demo.csv")
    job = json.loads(await ok(api_url, key, "submit", "demo.csv", "-p", "rows=1", "--priority", "8"))
    assert job["priority"] == 8 and job["waiting_for"] == {"paused": "report_type:demo.csv"}
    code, _, err = await reportctl(api_url, key, "submit", "demo.csv", "--priority", "10")
    assert code == 2 and "priority" in err.lower()
