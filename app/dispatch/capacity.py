"""The dispatch state's capacity side: the policy every claim obeys, the slots jobs hold (rebuilt after a
flush, held once a start commits, freed when attempts end), and why a job would wait.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.core.config import get_settings
from app.core.redis_pool import get_pool
from app.dispatch import lanes
from app.dispatch.lanes import Lane, Wait, registered_scripts
from app.dispatch.queue import WAKE_CHANNEL


async def set_policy(policy: lanes.Policy) -> None:
    """Make `policy` the one every worker's claim obeys, and wake them (a resume or a raised cap)."""
    scripts = await registered_scripts()
    await scripts.policy(args=[WAKE_CHANNEL, *lanes.policy_args(policy)])


async def dispatch_ready() -> bool:
    return bool(await (await get_pool()).exists(lanes.READY_KEY))


async def rebuild_dispatch(running: Sequence[lanes.Running], policy: lanes.Policy) -> bool:
    """After a flush: the policy and the slots of the running jobs, unless someone rebuilt already."""
    scripts = await registered_scripts()
    args = lanes.rebuild_args(WAKE_CHANNEL, running, policy)
    return bool(await scripts.rebuild(args=args))


# How long the stuck scan's word that an attempt is over stops a late start of it (its worker stalled, alive).
FENCE_TTL_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class Hold:
    """A started attempt's slot check: its message (`arq_id`), its worker's delivery token, its lane, the
    in-progress lease to keep (ms) and the attempt (`attempt_code`)."""

    arq_id: str
    token: str
    lane: lanes.Lane
    lease_ms: int
    attempt: int


async def hold_slots(holds: Sequence[Hold]) -> list[str] | None:
    """Once their attempts started: each job's slot and the delivery held by its message and worker, in one
    round trip for a start batch (see lua/hold.lua). Per attempt 'ok', 'over' (a cap is full and the job
    holds no slot) or 'superseded' (a later attempt holds the slot, or this one was declared over); None
    when the dispatch state must be rebuilt first."""
    scripts = await registered_scripts()
    args: list[str | int] = [int(time.time() * 1000)]
    for h in holds:
        args += [h.arq_id, h.token, h.lane.tenant, h.lane.report_type, h.lease_ms, h.attempt]
    answer = await scripts.hold(args=args)
    if not isinstance(answer, list):
        return None
    return [item.decode() if isinstance(item, bytes) else str(item) for item in answer]


async def release_slots(
    job_ids: Sequence[str],
    seen: Mapping[str, tuple[str, float]] | None = None,
    over: Mapping[str, int] | None = None,
) -> int:
    """Free the slots these jobs hold and drop the messages holding them (their attempts are over). With
    `seen` (from `slots_held`), only a slot still held as seen: one a claim or a start took over since stays.
    `over`: the attempt (`attempt_code`) each job's was declared over, fenced off from a late start."""
    over = over or {}
    if seen is not None:
        job_ids = [job_id for job_id in job_ids if job_id in seen or job_id in over]
    if not job_ids:
        return 0
    scripts = await registered_scripts()
    keys = [get_settings().queue_name]
    args: list[str | int] = [WAKE_CHANNEL, FENCE_TTL_MS]
    for job_id in job_ids:
        slot = "" if seen is None else f"{seen[job_id][0]}\t{seen[job_id][1]:.0f}" if job_id in seen else "-"
        args += [job_id, slot, over.get(job_id, "")]
    return int(await scripts.release(keys=keys, args=args))


async def slots_held() -> dict[str, tuple[str, float]]:
    return await lanes.claims(await get_pool())


async def explain_waits(lanes_of: Sequence[Lane]) -> list[Wait | None]:
    """What would keep jobs of these lanes waiting now (a pause, a full cap): one round trip for all."""
    if not lanes_of:
        return []
    scripts = await registered_scripts()
    args = [name for lane in lanes_of for name in (lane.tenant, lane.report_type)]
    return [Wait.parse(raw) for raw in await scripts.explain(args=args)]


async def running_counts() -> tuple[dict[str, int], dict[str, int]]:
    """Slots held now across every worker: by report type, by tenant."""
    return await lanes.running_counts(await get_pool())
