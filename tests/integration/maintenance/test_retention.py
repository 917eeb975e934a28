"""Retention: finished jobs and their files go after JOB_RETENTION_S; what must stay, stays."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from app.core.config import get_settings
from app.maintenance import service as maintenance
from tests.utils.jobs import submit_id
from tests.utils.workers import drain


async def test_expired_jobs_and_their_files_are_purged_but_dead_letters_and_idempotency_keep_theirs(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(JOB_RETENTION_S="0.3", IDEMPOTENCY_TTL_S="3600")
    done = await submit_id(client, auth, "demo.csv", rows=5)
    cancelled = await submit_id(client, auth, "demo.csv", rows=5)
    await client.post(f"/v1/jobs/{cancelled}/cancel", headers=auth)
    dead = await submit_id(client, auth, "demo.flaky", fail_times=1, permanent=True)
    keyed = await submit_id(client, {**auth, "Idempotency-Key": "order-7"}, "demo.csv", rows=1)
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
