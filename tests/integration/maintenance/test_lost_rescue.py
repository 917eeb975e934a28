"""A lost worker's rescue, for real: the stuck scan and the same tick's reconciliation leave the job one
message, so a cap holds while it runs again (one slot per job, never a message running without it).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from app.attempts import service
from app.core import failpoints, redis_pool
from app.core.config import get_settings
from app.dispatch import claiming, lanes
from app.fairshare import service as fairshare
from app.maintenance import service as maintenance
from tests.utils.attempt_runs import attempt_runs
from tests.utils.fair_share_runs import most_at_once
from tests.utils.jobs import get_job, submit_id
from tests.utils.lanes import messages_of, now_ms
from tests.utils.workers import drain


def slow_first(delay_s: float) -> failpoints.Action:
    """Holds back the first claimed message a worker runs, so the ones claimed with it reach MySQL first."""
    hits = [0]

    async def action() -> None:
        hits[0] += 1
        if hits[0] == 1:
            await asyncio.sleep(delay_s)

    return action


async def test_a_rescued_job_and_its_reconciled_twin_never_run_above_the_cap(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(
        REPORT_TYPE_MAX_CONCURRENCY=json.dumps({"demo.sleep": 2}),
        STUCK_AFTER_S="0.5",
        RETRY_DELAYS_S="[0.05, 0.05, 0.05]",
    )
    rescued = await submit_id(client, auth, "demo.sleep", seconds=0.6)
    # A worker claims it, starts it and dies: its message stays in progress under a lease of minutes.
    await fairshare.rebuild_dispatch()
    scripts = lanes.Scripts(await redis_pool.get_pool())
    claim = await claiming.claim(scripts, get_settings().queue_name, now_ms(), 1, 600_000)
    assert [job.job_id for job in claim.jobs] == [f"{rescued}:0"]
    assert isinstance(await service.start_attempt(rescued, "gone:1"), service.Started)
    await asyncio.sleep(0.6)
    tick = await maintenance.run_tick(use_lease=False)  # the stuck scan, then the reconciliation
    assert tick["lost"] == 1, tick
    await asyncio.sleep(0.1)
    others = [await submit_id(client, auth, "demo.sleep", seconds=0.6) for _ in range(3)]
    with failpoints.armed("claim.after_claim", slow_first(0.3)):
        await drain(max_jobs=4, timeout_s=30)

    runs = [run for run in await attempt_runs("demo.sleep") if run.job_id in {rescued, *others}]
    after_rescue = runs[1:]  # the dead worker's attempt was declared lost before any of these
    assert most_at_once(after_rescue) <= 2, after_rescue
    assert most_at_once([run for run in after_rescue if run.job_id == rescued]) == 1
    for job_id in (rescued, *others):
        assert (await get_job(client, auth, job_id))["status"] == "done"
    assert await messages_of(rescued) == []


async def test_a_rescued_job_has_one_message_after_the_tick(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(STUCK_AFTER_S="0.5", RETRY_DELAYS_S="[1, 1, 1]")  # due before the next tick
    rescued = await submit_id(client, auth, "demo.sleep", seconds=0.6)
    await fairshare.rebuild_dispatch()
    scripts = lanes.Scripts(await redis_pool.get_pool())
    await claiming.claim(scripts, get_settings().queue_name, now_ms(), 1, 600_000)
    assert isinstance(await service.start_attempt(rescued, "gone:1"), service.Started)
    await asyncio.sleep(0.6)
    tick = await maintenance.run_tick(use_lease=False)
    assert tick["lost"] == 1, tick
    assert await messages_of(rescued) == [f"{rescued}:0:lost1"]  # deferred by the backoff, in its lane
    await maintenance.run_tick(use_lease=False)
    assert await messages_of(rescued) == [f"{rescued}:0:lost1"]
