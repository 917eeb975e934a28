"""Schemathesis against the live `/openapi.json` of a real uvicorn (private MariaDB + Redis), authenticated.

Bounded to about a minute: no 5xx, and every response conforms to the documented schema.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devtools.servers import MariaDBServer, RedisServer, free_port
from tests.utils.database import ROOT, alembic

CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
        "negative_data_rejection",
        "ignored_auth",
    ]
)


@pytest.fixture
def live_api(mariadb: MariaDBServer, redis_server: RedisServer, tmp_path: Path) -> Iterator[tuple[str, str]]:
    mariadb.sql("DROP DATABASE IF EXISTS fuzz; CREATE DATABASE fuzz")
    url = mariadb.url.rsplit("/", 1)[0] + "/fuzz"
    assert alembic(url, "upgrade", "head").returncode == 0
    env = dict(
        os.environ,
        DATABASE_URL=url,
        REDIS_URL=redis_server.url.replace("/0", "/3"),
        ENABLE_DEMO_REPORTS="true",
        OUTPUT_DIR=str(tmp_path / "out"),
        LOG_LEVEL="ERROR",
        API_KEY_CACHE_TTL_S="0",
        RETRY_DELAYS_S="[0.1]",
        JOB_TIMEOUT_S="0.5",
    )
    key = (
        subprocess.run(
            [
                sys.executable,
                "-m",
                "app.cli",
                "keys",
                "create",
                "--tenant",
                "fuzz",
                "--scopes",
                "jobs:read,jobs:write,admin",
            ],
            env=env,
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    port = free_port()
    log = open(tmp_path / "api.log", "w")  # noqa: SIM115
    api = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    # A worker finishes the generated jobs quickly (0.5 s limit), so `?wait=` long-polls return early.
    worker = subprocess.Popen(
        [sys.executable, "-m", "workers.report_worker"],
        env=env,
        cwd=ROOT,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    try:
        for _ in range(200):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", key
    finally:
        for proc in (worker, api):
            proc.terminate()
            proc.wait(10)
        log.close()
        if api.returncode not in (0, -15):
            print((tmp_path / "api.log").read_text()[-5000:])


@pytest.mark.timeout(240)
def test_schemathesis_finds_no_5xx_and_no_schema_violation(live_api: tuple[str, str], tmp_path: Path) -> None:
    base_url, key = live_api
    schemathesis = Path(sys.executable).with_name("schemathesis")
    result = subprocess.run(
        [
            str(schemathesis),
            "run",
            f"{base_url}/openapi.json",
            "-H",
            f"Authorization: Bearer {key}",
            "--checks",
            CHECKS,
            "--max-examples",
            "25",
            "--seed",
            "20261123",
            "--request-timeout",
            "40",
            "--phases",
            "examples,coverage,fuzzing",
            "--suppress-health-check",
            "all",
            "--no-color",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=230,
    )
    assert result.returncode == 0, result.stdout[-12000:]
