"""Shared fixtures: private MariaDB and Redis on free ports, the schema via alembic, a clean slate per test.

Never touches the system servers on 3306/6379; servers are stopped by PID at the end of the session.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from arq.worker import Worker
from sqlalchemy import text

from workers.local_servers import MariaDBServer, RedisServer, ensure_binaries

ROOT = Path(__file__).resolve().parent.parent

# Fast defaults so the whole state machine runs in well under a second per attempt.
BASE_ENV = {
    "ENV": "test",
    "ENABLE_DEMO_REPORTS": "true",
    "RETRY_DELAYS_S": "[0.2, 0.4, 0.6]",
    "JOB_TIMEOUT_S": "5",
    "STUCK_AFTER_S": "3",
    "SCAN_INTERVAL_S": "0.5",
    "WORKER_POLL_DELAY_S": "0.01",
    "API_KEY_CACHE_TTL_S": "0",
    "LOG_JSON": "false",
    "LOG_LEVEL": "WARNING",
    "ALERT_COALESCE_S": "0.2",
    "ALERT_TIMEOUT_S": "0.5",
    "ALERT_RETRY_MAX_S": "0.5",
    "CALLBACK_SECRET": "cb-test-secret-0123456789",
    "CALLBACK_ALLOWED_HOSTS": "127.0.0.1",
    "CALLBACK_RETRY_DELAYS_S": "[0.1, 0.2, 0.3]",
    "CALLBACK_TIMEOUT_S": "0.5",
}


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDBServer]:
    ensure_binaries(redis=False)
    server = MariaDBServer()
    server.start()
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    ensure_binaries(mariadb=False)
    server = RedisServer()
    server.start()
    yield server
    server.cleanup()


def alembic(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DATABASE_URL=url)
    return subprocess.run(
        [sys.executable, "-m", "alembic", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="session")
def base_env(
    mariadb: MariaDBServer, redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    result = alembic(mariadb.url, "upgrade", "head")
    assert result.returncode == 0, result.stderr
    env = dict(
        BASE_ENV,
        DATABASE_URL=mariadb.url,
        REDIS_URL=redis_server.url,
        OUTPUT_DIR=str(tmp_path_factory.mktemp("outputs")),
    )
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield env
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


async def reset_process_state() -> None:
    """Forget cached settings, engine and Redis pool so the next use reads the current environment."""
    from app.core import queue
    from app.core.config import reset_settings
    from app.core.db import dispose_engine

    await queue.close_pool()
    await dispose_engine()
    reset_settings()


@pytest.fixture
async def env(
    base_env: dict[str, str], redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Any]:
    """A clean database and Redis; call `await env.set(NAME=value, …)` to change settings for this test."""
    from app.core.db import session_scope

    await reset_process_state()
    async with session_scope() as session:
        for table in ("job_attempts", "dead_letters", "report_jobs", "api_keys"):
            await session.execute(text(f"DELETE FROM {table}"))
    redis_server.flushall()

    class Env:
        redis = redis_server

        async def set(self, **values: Any) -> None:
            for key, value in values.items():
                monkeypatch.setenv(key, str(value))
            await reset_process_state()

    yield Env()
    await reset_process_state()


@pytest.fixture
async def client(env: Any) -> AsyncIterator[httpx.AsyncClient]:
    from app.api.main import create_app

    app = create_app()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c


async def make_key(tenant: str = "acme", scopes: str = "jobs:read,jobs:write") -> dict[str, str]:
    from app.auth import service

    _, raw = await service.create_api_key(tenant, scopes.split(","))
    return {"Authorization": f"Bearer {raw}"}


@pytest.fixture
async def auth(env: Any) -> dict[str, str]:
    return await make_key()


def build_worker(**overrides: Any) -> Worker:
    from workers.base import OrchestratorWorker
    from workers.report_worker import worker_options

    options = worker_options()
    options.update(burst=True, poll_delay=0.01, handle_signals=False)
    options.update(overrides)
    return OrchestratorWorker(**options)


async def drain(*, workers: int = 1, timeout_s: float = 60, **overrides: Any) -> None:
    """Run burst workers until the queue (deferred retries included) is empty."""
    built = [build_worker(**overrides) for _ in range(workers)]
    try:
        await asyncio.wait_for(asyncio.gather(*(w.main() for w in built)), timeout_s)
    finally:
        for w in built:
            await w.close()


async def drain_alerts(timeout_s: float = 60, **overrides: Any) -> None:
    """Run a burst dead-letter consumer until the failed channel is empty."""
    from workers.base import OrchestratorWorker
    from workers.dead_letter import worker_options

    options = worker_options()
    options.update(burst=True, poll_delay=0.01, handle_signals=False)
    options.update(overrides)
    worker = OrchestratorWorker(**options)
    try:
        await asyncio.wait_for(worker.main(), timeout_s)
    except asyncio.CancelledError:
        pass
    finally:
        await worker.close()


@pytest.fixture
async def dingtalk(env: Any) -> AsyncIterator[Any]:
    from tests.fakes.dingtalk import FakeDingTalk

    fake = FakeDingTalk().start()
    await env.set(DINGTALK_WEBHOOK_URL=fake.url, DINGTALK_SECRET=fake.secret)
    yield fake
    fake.stop()


@pytest.fixture
async def receiver(env: Any) -> AsyncIterator[Any]:
    from tests.fakes.receiver import Receiver

    fake = Receiver().start()
    yield fake
    fake.stop()
