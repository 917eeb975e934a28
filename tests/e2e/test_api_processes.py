"""The API as several uvicorn processes (`python -m app.serve`, API_WORKERS=2), for real: every
/metrics answer, whichever process serves it, counts the submits of all of them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from devtools.servers import free_port
from tests.utils.metrics import promtool_check, samples
from tests.utils.stack import PYTHON, Stack, wait_until

pytestmark = pytest.mark.timeout(120)

JOBS = 40


def children(pid: int) -> list[int]:
    found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in found]


def submitted(text: str) -> float:
    return sum(v for name, _, v in samples(text) if name == "reports_jobs_submitted_total")


async def test_every_metrics_answer_of_several_api_processes_counts_the_submits_of_all(stack: Stack) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    api = stack.spawn(
        "api", [PYTHON, "-m", "app.serve", "--host", "127.0.0.1", "--port", str(port)], API_WORKERS=2
    )

    def healthy() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=1.0, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(healthy, 60, "api /healthz", [api], interval=0.1)
    wait_until(lambda: len(children(api.pid)) >= 2, 30, "two API processes", [api])
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    body = {"report_type": "demo.csv", "params": {"rows": 1}}
    limits = httpx.Limits(max_connections=8)
    async with httpx.AsyncClient(base_url=url, headers=headers, trust_env=False, limits=limits) as client:
        answers = await asyncio.gather(*(client.post("/v1/jobs", json=body) for _ in range(JOBS)))
        assert [a.status_code for a in answers] == [202] * JOBS
        # Fresh connections, so the answers come from either process.
        for _ in range(8):
            async with httpx.AsyncClient(base_url=url, trust_env=False) as fresh:
                text = (await fresh.get("/metrics")).text
            assert submitted(text) == JOBS, text[:2000]
    assert promtool_check(text).returncode == 0
