"""A real API process (uvicorn) on a free port against this session's MariaDB and Redis, for tests that drive
it from outside (reportctl), and `reportctl …` run as a subprocess against it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from devtools.servers import free_port
from tests.utils.stack import PYTHON, ROOT, Proc, wait_until

LOCAL = {"NO_PROXY": "127.0.0.1,localhost", "LOG_JSON": "false"}


@contextmanager
def live_api(log_dir: Path) -> Iterator[str]:
    """Start `uvicorn app.main:app` with this process's settings; yields its base URL; stops it by PID."""
    port = free_port()
    argv = [PYTHON, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1", "--port", str(port)]
    proc = Proc("api", argv, dict(os.environ, **LOCAL), log_dir / "api.log")
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=1.0, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        proc.start()
        wait_until(healthy, 30, "the API's /healthz", [proc], interval=0.1)
        yield url
    finally:
        proc.cleanup()


async def reportctl(api_url: str, api_key: str, *args: str) -> tuple[int, str, str]:
    """`reportctl ARGS --api-url … --api-key …` as a subprocess: (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        PYTHON,
        "-m",
        "app.cli",
        *args,
        "--api-url",
        api_url,
        "--api-key",
        api_key,
        cwd=ROOT,
        env=dict(os.environ, **LOCAL),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
