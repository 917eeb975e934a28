"""Security (issue 5) on the real app, MariaDB, Redis and arq workers: keys, scopes, cross-tenant writes,
output download names, secrets in logs and documents, forged Redis messages.

What test_api_contract.py, test_limits.py, test_dead_letters.py and test_idempotency_and_tenants.py already
prove (401/403/404 basics, limits, read isolation) is not repeated here.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import os
import pickle
import re
import secrets
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy import text

from app.auth import service
from app.core import redis_pool
from app.core.config import get_settings
from app.core.db import session_scope
from app.core.errors import ValidationFailed
from app.core.logs import setup_logging
from app.core.tenancy import EVERY_TENANT
from app.dispatch import capacity, lanes, queue
from app.jobs.repository import JobRepository
from app.reports.base import ReportContext
from app.reports.registry import registry
from devtools.servers import MariaDBServer, free_port
from tests.utils.database import ROOT
from tests.utils.fakes.dingtalk import FakeDingTalk
from tests.utils.jobs import submit_id
from tests.utils.keys import bearer, make_key
from tests.utils.problems import BOGUS_ID, assert_problem
from tests.utils.workers import drain, drain_alerts

CSV = {"report_type": "demo.csv", "params": {"rows": 3}}
SAFE_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")


# ---- helpers ----------------------------------------------------------------------------------------


async def dead_job(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    """A job that dies on its first attempt (permanent error) and leaves a dead letter."""
    job_id = await submit_id(client, headers, "demo.flaky", fail_times=1, permanent=True)
    await drain()
    return job_id


async def job_state(job_id: str) -> dict[str, Any]:
    """The job row and its dead letters as stored: what a forbidden request must not change."""
    async with session_scope() as session:
        job = await JobRepository(session).get_job(job_id, EVERY_TENANT)
        letters = (
            await session.execute(
                text("SELECT id, replayed_at, archived_at FROM dead_letters WHERE job_id = :j ORDER BY id"),
                {"j": job_id},
            )
        ).all()
    assert job is not None
    return {
        "status": job.status,
        "attempt": job.attempt,
        "replay_count": job.replay_count,
        "attempts_total": job.attempts_total,
        "cancel_requested": job.cancel_requested,
        "updated_at": job.updated_at,
        "finished_at": job.finished_at,
        "letters": [tuple(row) for row in letters],
    }


async def api_key_row(key_id: str) -> dict[str, Any]:
    async with session_scope() as session:
        row = (await session.execute(text("SELECT * FROM api_keys WHERE id = :id"), {"id": key_id})).one()
    return dict(row._mapping)


async def reportctl(*args: str) -> tuple[int, str, str]:
    """`reportctl …` as a subprocess against the test database (DATABASE_URL of this session)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        *args,
        cwd=ROOT,
        env=dict(os.environ, DATABASE_URL=os.environ["DATABASE_URL"], LOG_JSON="false"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def new_replica() -> httpx.AsyncClient:
    """Another API replica: its own app, hence its own key cache."""
    from app.application import create_app

    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app()), base_url="http://test")


@pytest.fixture
def report_type() -> Iterator[Any]:
    """Register test-only report types in the process-wide registry (the app and drain() workers share it)."""
    added: list[str] = []

    def register(name: str, params: type[BaseModel], fn: Any) -> None:
        registry.report_type(name, params=params)(fn)
        added.append(name)

    yield register
    for name in added:
        registry._types.pop(name, None)


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


# ---- keys -----------------------------------------------------------------------------------------


async def test_created_key_has_the_ro_prefix_and_at_least_32_random_bytes(env: Any) -> None:
    raws = [(await service.create_api_key("acme", ["jobs:read"]))[1] for _ in range(3)]
    for raw in raws:
        assert raw.startswith("ro_"), raw
        body = raw.removeprefix("ro_")
        assert re.fullmatch(r"[A-Za-z0-9_-]+", body), raw
        assert len(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))) >= 32
    assert len(set(raws)) == 3


async def test_only_the_sha256_of_a_key_is_stored(env: Any) -> None:
    key, raw = await service.create_api_key("acme", ["jobs:read", "jobs:write"], name="ci")
    row = await api_key_row(key.id)
    assert row["key_hash"] == hashlib.sha256(raw.encode()).hexdigest()
    secret_part = raw[len(row["prefix"]) :]
    assert len(secret_part) >= 32
    for column, value in row.items():
        assert raw not in str(value), column
        assert secret_part not in str(value), column
    # The stored prefix is only an identifier: far too short to authenticate with.
    assert len(row["prefix"]) <= 12 and raw.startswith(row["prefix"])


async def test_reportctl_keys_create_prints_a_working_key_and_list_never_prints_a_secret(
    client: httpx.AsyncClient, env: Any
) -> None:
    code, out, err = await reportctl(
        "keys", "create", "--tenant", "acme", "--scopes", "jobs:read", "--name", "ci"
    )
    assert code == 0, err
    raw = out.strip().splitlines()[-1]
    assert raw.startswith("ro_") and raw not in err
    key_id = re.search(r"created key (\S+)", err)
    assert key_id is not None, err
    assert (await client.get("/v1/jobs", headers=bearer(raw))).status_code == 200
    assert_problem(await client.post("/v1/jobs", json=CSV, headers=bearer(raw)), 403)

    list_code, listing, list_err = await reportctl("keys", "list", "--tenant", "acme")
    assert list_code == 0, list_err
    assert key_id.group(1) in listing and "tenant=acme" in listing and "active" in listing
    row = await api_key_row(key_id.group(1))
    for secret in (raw, raw[len(row["prefix"]) :], row["key_hash"]):
        assert secret not in listing + list_err


async def test_key_revoked_with_reportctl_is_refused_by_every_replica_within_the_cache_ttl(env: Any) -> None:
    await env.set(API_KEY_CACHE_TTL_S=2)
    key, raw = await service.create_api_key("acme", ["jobs:read"])
    replicas = [await new_replica(), await new_replica()]
    try:
        for replica in replicas:  # warm both caches
            assert (await replica.get("/v1/jobs", headers=bearer(raw))).status_code == 200
        revoke = asyncio.create_task(reportctl("keys", "revoke", key.id))
        refused_at: dict[int, datetime] = {}
        deadline = time.monotonic() + 30
        while len(refused_at) < len(replicas) and time.monotonic() < deadline:
            for i, replica in enumerate(replicas):
                if i in refused_at:
                    continue
                resp = await replica.get("/v1/jobs", headers=bearer(raw))
                if resp.status_code == 401:
                    refused_at[i] = datetime.now(UTC)
                else:
                    assert resp.status_code == 200, resp.text
            await asyncio.sleep(0.05)
        code, out, err = await revoke
    finally:
        for replica in replicas:
            await replica.aclose()
    assert code == 0 and out.strip() == "revoked", err
    revoked_at = (await api_key_row(key.id))["revoked_at"]
    assert revoked_at is not None
    revoked_at = revoked_at.replace(tzinfo=UTC) if revoked_at.tzinfo is None else revoked_at
    assert len(refused_at) == len(replicas), "a replica kept accepting the revoked key"
    lags = [(at - revoked_at).total_seconds() for at in refused_at.values()]
    assert all(lag <= 3.0 for lag in lags), lags


# ---- scopes ---------------------------------------------------------------------------------------


async def test_read_only_key_cannot_replay_or_cancel_and_the_jobs_are_unchanged(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    dead = await dead_job(client, auth)
    pending = await submit_id(client, auth, "demo.csv", rows=3)
    reader = await make_key("acme", "jobs:read")
    before = {j: await job_state(j) for j in (dead, pending)}
    for job_id in (dead, pending):
        assert_problem(await client.post(f"/v1/jobs/{job_id}/replay", headers=reader), 403)
        assert_problem(await client.post(f"/v1/jobs/{job_id}/cancel", headers=reader), 403)
    assert {j: await job_state(j) for j in (dead, pending)} == before


async def test_missing_scope_is_403_before_any_lookup_on_replay_cancel_and_bulk_replay(
    client: httpx.AsyncClient, env: Any
) -> None:
    reader = await make_key("acme", "jobs:read")
    writer = await make_key("acme", "jobs:read,jobs:write")
    # An id that exists nowhere: 403, not 404, so a key without the scope learns nothing.
    assert_problem(await client.post(f"/v1/jobs/{BOGUS_ID}/replay", headers=reader), 403)
    assert_problem(await client.post(f"/v1/jobs/{BOGUS_ID}/cancel", headers=reader), 403)
    for body in ({"job_ids": [BOGUS_ID]}, {"report_type": "demo.flaky"}, {}, {"job_ids": "nope"}):
        assert_problem(await client.post("/v1/dead-letters/replay", json=body, headers=writer), 403)
    resp = await client.post(
        "/v1/dead-letters/replay", content=b"{oops", headers={**writer, "Content-Type": "application/json"}
    )
    assert_problem(resp, 403)


async def test_write_key_cannot_bulk_replay_and_the_dead_letters_stay_unreplayed(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    dead = await dead_job(client, auth)
    before = await job_state(dead)
    writer_only = await make_key("acme", "jobs:write")
    for headers in (auth, writer_only):
        for body in ({"job_ids": [dead]}, {"report_type": "demo.flaky"}):
            assert_problem(await client.post("/v1/dead-letters/replay", json=body, headers=headers), 403)
    assert await job_state(dead) == before
    assert before["status"] == "dead" and before["letters"][0][1] is None


# ---- cross-tenant writes --------------------------------------------------------------------------


async def test_replay_and_cancel_of_another_tenants_job_are_404_and_change_nothing(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    dead = await dead_job(client, auth)
    pending = await submit_id(client, auth, "demo.csv", rows=3)
    other = await make_key("globex", "jobs:read,jobs:write")
    before = {j: await job_state(j) for j in (dead, pending)}
    for job_id in (dead, pending):
        # 404 whatever the state (the owner would get 409 for one of each): existence is not revealed.
        assert_problem(await client.post(f"/v1/jobs/{job_id}/replay", headers=other), 404)
        assert_problem(await client.post(f"/v1/jobs/{job_id}/cancel", headers=other), 404)
    assert {j: await job_state(j) for j in (dead, pending)} == before
    assert before[dead]["status"] == "dead" and before[pending]["status"] == "pending"
    # And the owner still can: the 404 was about the tenant, not the job.
    assert (await client.post(f"/v1/jobs/{dead}/replay", headers=auth)).status_code == 202
    assert (await client.post(f"/v1/jobs/{pending}/cancel", headers=auth)).status_code == 202


async def test_dead_letters_are_invisible_across_tenants_even_archived_and_admin_sees_all(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    other = await make_key("globex", "jobs:read,jobs:write")
    acme_job = await dead_job(client, auth)
    globex_job = await dead_job(client, other)
    admin = await make_key("ops", "admin")

    async def seen(headers: dict[str, str]) -> set[str]:
        resp = await client.get(
            "/v1/dead-letters", params={"include_archived": "true", "limit": 200}, headers=headers
        )
        assert resp.status_code == 200, resp.text
        return {item["job_id"] for item in resp.json()["items"]}

    assert await seen(auth) == {acme_job}
    assert await seen(other) == {globex_job}
    assert await seen(admin) == {acme_job, globex_job}


async def test_admin_may_replay_and_cancel_a_job_of_any_tenant(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    dead = await dead_job(client, auth)
    pending = await submit_id(client, auth, "demo.csv", rows=3)
    admin = await make_key("ops", "admin")
    replayed = await client.post(f"/v1/jobs/{dead}/replay", headers=admin)
    assert replayed.status_code == 202 and replayed.json()["replay_count"] == 1
    cancelled = await client.post(f"/v1/jobs/{pending}/cancel", headers=admin)
    assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"


async def test_tenant_names_that_mysql_would_confuse_cannot_be_created(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    """MySQL's default collation folds case, accents and trailing spaces: tenants are lowercase slugs."""
    job_id = await submit_id(client, auth, "demo.csv", rows=3)
    before = await job_state(job_id)
    for tenant in ("ACME", "acme ", "ácme", " acme", "acme\n", ""):
        with pytest.raises(ValidationFailed):
            await make_key(tenant, "jobs:read,jobs:write")
    assert await job_state(job_id) == before


# ---- output download ------------------------------------------------------------------------------


class NamedParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=500)


async def named_output(ctx: ReportContext, params: NamedParams) -> None:
    """Writes a file under a name taken from the (tenant-supplied) params."""
    with ctx.output(params.name, "text/plain") as fh:
        fh.write(f"report of {ctx.job_id}\n")


def output_root() -> Path:
    return Path(get_settings().output_dir).resolve()


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def stored_file(root: Path, relative: str) -> Path:
    path = (root / relative).resolve()
    assert path.is_file(), relative
    return path


HOSTILE_NAMES = [
    "../../etc/passwd\r\nX-Injected: 1.csv",
    "/etc/passwd",
    "..\\..\\windows\\win.ini",
    "a.csv\"; filename*=UTF-8''evil.sh",
    "..",
    "%2e%2e%2f%2e%2e%2fetc%2fshadow",
    "\u202etxt.exe",
    "nul\x00byte.txt",
    "报告.csv",
]


async def test_output_filename_from_hostile_params_is_sanitised_and_the_file_stays_under_output_dir(
    client: httpx.AsyncClient, auth: dict[str, str], report_type: Any
) -> None:
    report_type("test.named", NamedParams, named_output)
    root = output_root()
    files_before = files_under(root)
    jobs = {name: await submit_id(client, auth, "test.named", name=name) for name in HOSTILE_NAMES}
    await drain()
    other = await make_key("globex", "jobs:read")
    for name, job_id in jobs.items():
        job = (await client.get(f"/v1/jobs/{job_id}", headers=auth)).json()
        assert job["status"] == "done", (name, job)
        shown = job["output"]["filename"]
        assert SAFE_NAME.match(shown) and ".." not in shown, (name, shown)

        resp = await client.get(f"/v1/jobs/{job_id}/output", headers=auth)
        assert resp.status_code == 200, (name, resp.text)
        assert resp.text == f"report of {job_id}\n"
        raw_headers = resp.headers.raw
        assert "x-injected" not in {k.decode().lower() for k, _ in raw_headers}, name
        [disposition] = [v for k, v in raw_headers if k.lower() == b"content-disposition"]
        assert not re.search(rb"[\r\n\x00/\\]", disposition), (name, disposition)
        match = re.fullmatch(rb'attachment; filename="([^"]+)"', disposition)
        assert match is not None, (name, disposition)
        assert match.group(1).decode() == shown

        async with session_scope() as session:
            stored = await JobRepository(session).get_job(job_id, EVERY_TENANT)
        assert stored is not None and stored.output_path
        path = stored_file(root, stored.output_path)
        assert root in path.parents and path.parent.parent == root / job_id, (name, stored.output_path)
        # Another tenant gets 404 for a finished job's file too, never its bytes.
        theirs = await client.get(f"/v1/jobs/{job_id}/output", headers=other)
        assert_problem(theirs, 404)
        assert job_id + "\n" not in theirs.text
    # Nothing was written anywhere but under the jobs' own directories.
    new_files = files_under(root) - files_before
    assert {p.relative_to(root).parts[0] for p in new_files} == set(jobs.values())


# ---- secrets --------------------------------------------------------------------------------------


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


# ---- compromised Redis ------------------------------------------------------------------------------


async def test_forged_queue_message_for_a_finished_job_does_not_run_it_again(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_id = await submit_id(client, auth, "demo.csv", rows=3)
    await drain()
    before = await job_state(job_id)
    assert before["status"] == "done"
    for replay, suffix in ((0, "forged"), (7, None)):  # one message per job: each runs before the next
        assert await queue.enqueue_run(job_id, replay, suffix=suffix)
        await drain()
    assert await job_state(job_id) == before


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (str(self.marker),))


async def test_forged_redis_message_cannot_run_code_in_a_worker(env: Any, tmp_path: Path) -> None:
    from arq.constants import job_key_prefix

    marker = tmp_path / "pwned"
    pool = await redis_pool.get_pool()
    forged_id = "forged-" + secrets.token_hex(4)
    # Written where a worker takes messages from: arq's keys and a dispatch lane (app.dispatch.lanes).
    await capacity.rebuild_dispatch([], lanes.Policy())
    now_ms = int(time.time() * 1000)
    args = [
        queue.WAKE_CHANNEL,
        60_000,
        pickle.dumps(_Payload(marker)),
        now_ms,
        forged_id,
        lanes.Lane().encoded(),
    ]
    assert await lanes.Scripts(pool).enqueue(keys=[get_settings().queue_name], args=args)
    assert await pool.exists(job_key_prefix + forged_id)
    await drain()
    assert not marker.exists(), "a forged Redis message executed code in the worker"


# ---- fixtures sanity ---------------------------------------------------------------------------------


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
