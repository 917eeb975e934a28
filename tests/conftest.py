"""Shared fixtures: private MariaDB and Redis on free ports, the schema via alembic, a clean slate per test.

Never touches the system servers on 3306/6379; servers are stopped by PID at the end of the session.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from devtools.servers import MariaDBServer, RedisServer, ensure_binaries
from tests.utils.database import alembic
from tests.utils.keys import make_key
from tests.utils.settings import BASE_ENV, reset_process_state


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


@pytest.fixture
async def env(
    base_env: dict[str, str], redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Any]:
    """A clean database and Redis; call `await env.set(NAME=value, …)` to change settings for this test."""
    from app.core.db import session_scope

    await reset_process_state()
    async with session_scope() as session:
        tables = ("remote_attempts", "job_attempts", "dead_letters", "report_jobs", "api_keys")
        for table in (
            *tables,
            "worker_processes",
            "schedule_runs",
            "schedules",
            "tenant_policies",
            "report_type_policies",
            "finished_minutes",
            "open_letter_counts",
            "destinations",
            "notify_routes",
            "report_deliveries",  # notices of no job (a missed fire) outlive the jobs' cascade
            "notice_digests",
            "notice_digest_slots",
        ):
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
    from app.application import create_app

    app = create_app()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c


@pytest.fixture
async def auth(env: Any) -> dict[str, str]:
    return await make_key()


@pytest.fixture
async def dingtalk(env: Any) -> AsyncIterator[Any]:
    from tests.utils.fakes.dingtalk import FakeDingTalk

    fake = FakeDingTalk().start()
    await env.set(DINGTALK_WEBHOOK_URL=fake.url, DINGTALK_SECRET=fake.secret)
    yield fake
    fake.stop()


@pytest.fixture
async def receiver(env: Any) -> AsyncIterator[Any]:
    from tests.utils.fakes.receiver import Receiver

    fake = Receiver().start()
    yield fake
    fake.stop()


@pytest.fixture
def wecom() -> Iterator[Any]:
    """A fake WeCom group robot (no database needed): `WeComSender(wecom.url)` posts to it."""
    from tests.utils.fakes.wecom import FakeWeCom

    fake = FakeWeCom().start()
    yield fake
    fake.stop()


@pytest.fixture
def smtp_server() -> Iterator[Any]:
    """A plain SMTP server without AUTH (no database needed) on 127.0.0.1:`smtp_server.port`."""
    from tests.utils.fakes.smtp import FakeSMTP

    fake = FakeSMTP().start()
    yield fake
    fake.stop()


@pytest.fixture
def secure_smtp_server(tmp_path: Path) -> Iterator[Any]:
    """An SMTP server that requires STARTTLS and AUTH (`tests.utils.fakes.smtp` USERNAME and PASSWORD);
    connect to "localhost" and trust it with `secure_smtp_server.client_tls_context()`."""
    from tests.utils.fakes.smtp import PASSWORD, USERNAME, FakeSMTP

    fake = FakeSMTP(username=USERNAME, password=PASSWORD, starttls=True, ca_directory=tmp_path).start()
    yield fake
    fake.stop()
