"""Self-test of devtools/servers: private MariaDB and Redis children start, keep data, clean up."""

from __future__ import annotations

import asyncio
import os
import socket
import time

import pytest
import redis

from devtools.servers import (
    SYSTEM_PORTS,
    MariaDBServer,
    RedisServer,
    ensure_binaries,
    free_port,
)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module", autouse=True)
def _binaries() -> None:
    ensure_binaries()


def _report(capsys: pytest.CaptureFixture[str], message: str) -> None:
    with capsys.disabled():
        print(f"\n[servers-harness] {message}")


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_free_port_is_bindable_and_not_a_system_port() -> None:
    port = free_port()
    assert port not in SYSTEM_PORTS
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))


def test_system_ports_are_refused() -> None:
    with pytest.raises(ValueError):
        RedisServer(port=6379)
    with pytest.raises(ValueError):
        MariaDBServer(port=3306)


def test_mariadb_start_restart_kill(capsys: pytest.CaptureFixture[str]) -> None:
    server = MariaDBServer()
    try:
        began = time.monotonic()
        server.start()
        cold = time.monotonic() - began
        _report(
            capsys,
            f"MariaDB cold start {cold:.2f} s (install-db {server.init_seconds:.2f} s, "
            f"mariadbd up+setup {server.last_start_seconds:.2f} s) on port {server.port}",
        )
        assert cold < 15, f"MariaDB cold start took {cold:.1f} s"
        assert server.port not in SYSTEM_PORTS
        assert server.url == f"mysql+asyncmy://root@127.0.0.1:{server.port}/reports"
        first_pid = server.pid
        assert first_pid is not None

        server.sql(
            "CREATE TABLE harness (id INT PRIMARY KEY, label VARCHAR(32)) ENGINE=InnoDB;"
            "INSERT INTO harness VALUES (1, 'survives');",
            database="reports",
        )
        assert server.sql("SELECT @@character_set_server").strip() == "utf8mb4"

        port = server.port
        began = time.monotonic()
        server.restart()
        _report(capsys, f"MariaDB restart (stop+start) {time.monotonic() - began:.2f} s")
        assert server.port == port
        assert server.pid not in (None, first_pid)
        assert _process_gone(first_pid)
        assert server.sql("SELECT label FROM harness WHERE id = 1", database="reports").strip() == "survives"

        server.sql("INSERT INTO harness VALUES (2, 'committed');", database="reports")
        killed_pid = server.pid
        assert killed_pid is not None
        server.kill()
        assert server.pid is None
        assert _process_gone(killed_pid)
        began = time.monotonic()
        server.start()
        _report(capsys, f"MariaDB start after SIGKILL (crash recovery) {time.monotonic() - began:.2f} s")
        assert server.port == port
        rows = server.sql("SELECT id, label FROM harness ORDER BY id", database="reports")
        assert rows.splitlines() == ["1\tsurvives", "2\tcommitted"]
    finally:
        tmpdir = server._tmpdir
        server.cleanup()
    assert server.pid is None
    assert tmpdir is not None and not tmpdir.exists()


def test_mariadb_url_works_with_sqlalchemy_asyncmy() -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    async def roundtrip(url: str) -> tuple[str, int]:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                db = (await conn.execute(text("SELECT DATABASE()"))).scalar_one()
                one = (await conn.execute(text("SELECT 1"))).scalar_one()
                return db, one
        finally:
            await engine.dispose()

    with MariaDBServer() as server:
        assert asyncio.run(roundtrip(server.url)) == ("reports", 1)


def test_redis_set_get_flushall_restart(capsys: pytest.CaptureFixture[str]) -> None:
    server = RedisServer()
    try:
        began = time.monotonic()
        server.start()
        _report(capsys, f"Redis start {time.monotonic() - began:.2f} s on port {server.port}")
        assert server.port not in SYSTEM_PORTS
        assert server.url == f"redis://127.0.0.1:{server.port}/0"
        first_pid = server.pid
        assert first_pid is not None

        client = redis.Redis.from_url(server.url)
        try:
            client.set("harness", "value")
            assert client.get("harness") == b"value"
            server.flushall()
            assert client.get("harness") is None
            assert client.dbsize() == 0

            port = server.port
            client.set("before-restart", "1")
            server.restart()
            assert server.port == port
            assert server.pid not in (None, first_pid)
            assert _process_gone(first_pid)
            # Same URL, same client object: it reconnects; nothing persisted (--save "" --appendonly no).
            assert client.ping()
            assert client.get("before-restart") is None
            client.set("after-restart", "2")
            assert client.get("after-restart") == b"2"
        finally:
            client.close()

        killed_pid = server.pid
        assert killed_pid is not None
        server.kill()
        assert _process_gone(killed_pid)
        server.start()
        assert server.port == port
    finally:
        tmpdir = server._tmpdir
        server.cleanup()
    assert server.pid is None
    assert tmpdir is not None and not tmpdir.exists()
