"""The HTTP contract (CONTRACT.md) outside the jobs: the report types, health and readiness, the docs served
offline, the OpenAPI document's security, headers and problems, and /metrics as Prometheus text."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.utils.problems import PROBLEM, assert_problem


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
