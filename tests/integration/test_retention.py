"""Retention: finished jobs and their files go after JOB_RETENTION_S; what must stay, stays."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from app.core.config import get_settings
from app.maintenance import service as maintenance
from tests.conftest import drain


async def post(
    client: httpx.AsyncClient, auth: dict[str, str], body: dict[str, Any], key: str | None = None
) -> str:
    headers = {**auth, "Idempotency-Key": key} if key else auth
    resp = await client.post("/v1/jobs", json=body, headers=headers)
    assert resp.status_code == 202, resp.text
    return str(resp.json()["id"])


async def test_expired_jobs_and_their_files_are_purged_but_dead_letters_and_idempotency_keep_theirs(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(JOB_RETENTION_S="0.3", IDEMPOTENCY_TTL_S="3600")
    done = await post(client, auth, {"report_type": "demo.csv", "params": {"rows": 5}})
    cancelled = await post(client, auth, {"report_type": "demo.csv", "params": {"rows": 5}})
    await client.post(f"/v1/jobs/{cancelled}/cancel", headers=auth)
    dead = await post(
        client, auth, {"report_type": "demo.flaky", "params": {"fail_times": 1, "permanent": True}}
    )
    keyed = await post(client, auth, {"report_type": "demo.csv", "params": {"rows": 1}}, key="order-7")
    await drain()
    output_dir = Path(get_settings().output_dir) / done
    assert output_dir.is_dir()

    await asyncio.sleep(0.4)
    report = await maintenance.run_tick(use_lease=False)
    assert report["jobs_purged"] == 2
    for job_id in (done, cancelled):
        assert (await client.get(f"/v1/jobs/{job_id}", headers=auth)).status_code == 404
    assert not output_dir.exists()
    # A dead job stays while its dead letter does; a job holding an Idempotency-Key stays for the key's TTL.
    assert (await client.get(f"/v1/jobs/{dead}", headers=auth)).json()["status"] == "dead"
    again = await client.post(
        "/v1/jobs",
        json={"report_type": "demo.csv", "params": {"rows": 1}},
        headers={**auth, "Idempotency-Key": "order-7"},
    )
    assert again.status_code == 200 and again.json()["id"] == keyed
