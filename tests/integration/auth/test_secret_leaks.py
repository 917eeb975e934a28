"""Secrets (API keys, the database password, DingTalk's secret and token) never reach the logs, error
bodies, /openapi.json, the docs or /metrics, with the fixture that gives the database a real password."""

from __future__ import annotations

import logging
import os
import re
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, field_validator

from app.auth import service
from app.core.logs import setup_logging
from app.reports.base import ReportContext
from devtools.servers import MariaDBServer, free_port
from tests.utils.fakes.dingtalk import FakeDingTalk
from tests.utils.jobs import submit_id
from tests.utils.keys import bearer
from tests.utils.problems import BOGUS_ID, assert_problem
from tests.utils.refused_requests import CSV, dead_job
from tests.utils.workers import drain_alerts


@pytest.fixture
def app_logs(capfd: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """Every log line the processes' own logging setup writes (JSON, DEBUG), read through capfd."""
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level

    class Logs:
        def start(self) -> None:
            capfd.readouterr()
            setup_logging(
                "api"
            )  # what the API process does at start-up; workers do it in workers.common.run_worker

        def read(self) -> str:
            out, err = capfd.readouterr()
            return out + err

    yield Logs()
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)


DB_USER = "sec_probe"


@pytest.fixture(scope="session")
def password_db_url(mariadb: MariaDBServer) -> tuple[str, str]:
    """A MariaDB account with a real password on the test database: (DATABASE_URL, password)."""
    password = "DbPw" + secrets.token_hex(16)
    statements = "".join(
        f"CREATE OR REPLACE USER '{DB_USER}'@'{host}' IDENTIFIED BY '{password}';"
        f"GRANT ALL ON {mariadb.database}.* TO '{DB_USER}'@'{host}';"
        for host in ("%", "localhost", "127.0.0.1")
    )
    mariadb.sql(statements)
    return mariadb.url.replace("root@", f"{DB_USER}:{password}@"), password


async def test_secrets_never_reach_the_logs_of_submit_failed_auth_and_a_dead_job_alert(
    client: httpx.AsyncClient,
    env: Any,
    dingtalk: FakeDingTalk,
    app_logs: Any,
    password_db_url: tuple[str, str],
) -> None:
    db_url, db_password = password_db_url
    await env.set(LOG_LEVEL="DEBUG", LOG_JSON="true", DATABASE_URL=db_url)
    app_logs.start()
    _, raw = await service.create_api_key("acme", ["jobs:read", "jobs:write"])
    _, revoked_raw = await service.create_api_key("acme", ["jobs:read"])
    assert await service.revoke_api_key(revoked_raw[:12])
    headers = bearer(raw)

    job_id = await submit_id(client, headers, "demo.csv", rows=3)
    forged = "ro_" + secrets.token_urlsafe(32)
    for value in (f"Bearer {forged}", f"Bearer {revoked_raw}", f"Basic {raw}", f"Bearer {raw}x"):
        assert_problem(await client.get("/v1/jobs", headers={"Authorization": value}), 401)
    assert_problem(await client.post("/v1/jobs", json={"report_type": "nope"}, headers=headers), 422)
    dead = await dead_job(client, headers)
    await drain_alerts()
    assert len(dingtalk.accepted) == 1 and dead in dingtalk.accepted[0].text

    logs = app_logs.read()
    assert '"levelname": "DEBUG"' in logs or "DEBUG" in logs, logs[-2000:]
    assert job_id in logs and dead in logs, "the capture missed the worker's log lines"
    for name, secret in {
        "api key": raw,
        "api key secret part": raw[12:],
        "revoked api key": revoked_raw,
        "forged api key": forged,
        "dingtalk secret": dingtalk.secret,
        "database password": db_password,
        "callback secret": os.environ.get("CALLBACK_SECRET") or db_password,
    }.items():
        assert secret not in logs, f"{name} leaked into the logs"


async def test_dingtalk_webhook_access_token_never_reaches_the_logs_at_info(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any, dingtalk: FakeDingTalk, app_logs: Any
) -> None:
    await env.set(LOG_LEVEL="INFO", LOG_JSON="true")
    app_logs.start()
    token = dingtalk.url.split("access_token=", 1)[1]
    await dead_job(client, auth)
    await drain_alerts()
    assert len(dingtalk.accepted) == 1
    logs = app_logs.read()
    assert f"access_token={token}" not in logs


async def test_openapi_docs_and_metrics_contain_no_secret(
    client: httpx.AsyncClient, env: Any, dingtalk: FakeDingTalk, password_db_url: tuple[str, str]
) -> None:
    db_url, db_password = password_db_url
    await env.set(DATABASE_URL=db_url)
    _, raw = await service.create_api_key("acme", ["jobs:read", "jobs:write"])
    await submit_id(client, bearer(raw), "demo.csv", rows=3)
    assert (await client.get("/v1/jobs", headers=bearer("ro_" + "y" * 43))).status_code == 401
    token = dingtalk.url.split("access_token=", 1)[1]
    for path in ("/openapi.json", "/metrics", "/docs", "/redoc", "/healthz", "/readyz"):
        resp = await client.get(path)
        assert resp.status_code == 200, (path, resp.text)
        callback_secret = os.environ.get("CALLBACK_SECRET") or db_password
        for secret in (raw, raw[12:], dingtalk.secret, token, db_password, db_url, callback_secret):
            assert secret not in resp.text, path


class ExplodingParams(BaseModel):
    n: int

    @field_validator("n")
    @classmethod
    def _explode(cls, value: int) -> int:
        raise RuntimeError("validator crashed")  # not a ValueError: escapes pydantic as an unhandled error


async def exploding(ctx: ReportContext, params: ExplodingParams) -> None:
    """Never runs: submitting it crashes in params validation."""


async def test_error_bodies_never_echo_the_authorization_header_nor_the_database_password(
    env: Any, app_logs: Any, password_db_url: tuple[str, str], report_type: Any
) -> None:
    from app.application import create_app

    db_url, db_password = password_db_url
    await env.set(DATABASE_URL=db_url, API_KEY_CACHE_TTL_S=60, MAX_BODY_BYTES=2048, LOG_JSON="true")
    app_logs.start()
    report_type("test.exploding", ExplodingParams, exploding)
    _, raw = await service.create_api_key("acme", ["jobs:read", "jobs:write"])
    _, reader_raw = await service.create_api_key("acme", ["jobs:read"])
    _, unused_raw = await service.create_api_key("acme", ["jobs:read"])
    transport = httpx.ASGITransport(app=create_app(), raise_app_exceptions=False)
    bodies: dict[int, str] = {}
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        h = bearer(raw)
        job_id = await submit_id(c, h, "demo.csv", rows=3)
        await c.get("/v1/jobs", headers=bearer(reader_raw))  # cached from now on
        answers = [
            await c.get("/v1/jobs", headers=bearer(raw + "0")),  # 401
            await c.post("/v1/jobs", json=CSV, headers=bearer(reader_raw)),  # 403
            await c.get(f"/v1/jobs/{BOGUS_ID}", headers=h),  # 404
            await c.get(f"/v1/jobs/{job_id}/output", headers=h),  # 409
            await c.post(
                "/v1/jobs", json={"report_type": "demo.csv", "params": {"pad": "x" * 4096}}, headers=h
            ),
            await c.post("/v1/jobs", json={"report_type": "demo.csv", "params": {"rows": raw}}, headers=h),
            await c.post("/v1/jobs", json={"report_type": "test.exploding", "params": {"n": 1}}, headers=h),
        ]
        # MySQL unreachable: once at the key lookup (middleware) and once in a route (key still cached).
        await env.set(DATABASE_URL=re.sub(r"@127\.0\.0\.1:\d+/", f"@127.0.0.1:{free_port()}/", db_url))
        answers.append(await c.get("/v1/jobs", headers=h))  # cached key: the route's query fails
        answers.append(await c.get("/v1/jobs", headers=bearer(unused_raw)))  # the key lookup fails
    secrets_in_play = (raw, reader_raw, unused_raw, db_password)
    for resp in answers:
        body = assert_problem(resp, resp.status_code)
        bodies[resp.status_code] = resp.text
        assert "mysql" not in resp.text.lower(), body
        for secret in secrets_in_play:
            assert secret not in resp.text, body
            assert all(secret not in value for value in resp.headers.values()), resp.headers
    assert {401, 403, 404, 409, 413, 422, 500, 503} <= set(bodies), sorted(bodies)
    logs = app_logs.read()
    assert "validator crashed" in logs  # the 500 was logged, with its traceback …
    for secret in secrets_in_play:  # … and nothing secret with it
        assert secret not in logs


async def test_password_database_url_really_authenticates_with_the_password(
    env: Any, password_db_url: tuple[str, str]
) -> None:
    """Guards the secret-leak tests above: their DATABASE_URL is in use, and a wrong password is refused."""
    db_url, db_password = password_db_url
    await env.set(DATABASE_URL=db_url.replace(db_password, db_password[::-1]))
    with pytest.raises(Exception, match="Access denied"):
        await service.create_api_key("acme", ["jobs:read"])
    await env.set(DATABASE_URL=db_url)
    await service.create_api_key("acme", ["jobs:read"])
