"""API keys (issue 5): a ro_ prefix on 32 random bytes, only their SHA-256 stored, reportctl's create and
list never printing a secret, and a revoked key refused by every replica within the cache TTL."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import text

from app.auth import service
from app.core.db import session_scope
from tests.utils.database import ROOT
from tests.utils.keys import bearer
from tests.utils.problems import assert_problem
from tests.utils.refused_requests import CSV


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
