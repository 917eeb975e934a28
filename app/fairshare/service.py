"""Fair share: the policy the workers' claim obeys (caps, weights, pauses from MySQL, the settings and the
report types), kept in Redis by whoever changes it, rebuilt after a flush, and slots freed when a claim
outlived its job. The claim itself is one Lua script (app/dispatch: lanes.py, claiming.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from app.core.config import get_settings
from app.core.db import session_scope
from app.core.errors import NotFound
from app.core.grouping import GroupCommit
from app.core.states import JobStatus
from app.dispatch import capacity, queue
from app.dispatch.lanes import DEFAULT_PRIORITY, Policy, Running, Wait, attempt_code
from app.fairshare.repository import FairShareRepository
from app.models import ReportJob, ReportTypePolicy, TenantPolicy
from app.reports.registry import registry

log = logging.getLogger(__name__)

BY_TYPE, BY_TENANT = 0, 1  # the halves of capacity.running_counts()


def default_priority(report_type: str) -> int:
    """A job's priority when its submit (or schedule) names none: the type's own, else 5."""
    rtype = registry.get(report_type)
    return rtype.priority if rtype is not None and rtype.priority is not None else DEFAULT_PRIORITY


@dataclass(frozen=True)
class TypeCap:
    """A report type's running cap and where it comes from: `reportctl`/API, the setting, the type."""

    limit: int | None
    source: str | None  # "override" | "setting" | "declared" | None


def type_cap(name: str, row: ReportTypePolicy | None) -> TypeCap:
    if row is not None and row.max_concurrency is not None:
        return TypeCap(row.max_concurrency, "override")
    setting = get_settings().report_type_max_concurrency.get(name)
    if setting is not None:
        return TypeCap(setting, "setting")
    rtype = registry.get(name)
    if rtype is not None and rtype.max_concurrency is not None:
        return TypeCap(rtype.max_concurrency, "declared")
    return TypeCap(None, None)


def tenant_cap(row: TenantPolicy | None) -> int | None:
    if row is not None and row.max_running is not None:
        return row.max_running
    return get_settings().tenant_max_running or None


async def current_policy() -> Policy:
    async with session_scope() as session:
        repo = FairShareRepository(session)
        tenants, types = await repo.tenant_policies(), await repo.type_policies()
    return policy_of(tenants, types)


def policy_of(tenants: Sequence[TenantPolicy], types: Sequence[ReportTypePolicy]) -> Policy:
    by_type = {row.report_type: row for row in types}
    names = (
        {rtype.name for rtype in registry.all()}
        | set(by_type)
        | set(get_settings().report_type_max_concurrency)
    )
    type_caps = {}
    for name in names:
        cap = type_cap(name, by_type.get(name))
        if cap.limit is not None:
            type_caps[name] = cap.limit
    return Policy(
        type_caps=type_caps,
        tenant_caps={row.tenant: row.max_running for row in tenants if row.max_running is not None},
        tenant_cap_default=get_settings().tenant_max_running,
        weights={row.tenant: row.weight for row in tenants if row.weight != 1},
        paused_types=frozenset(row.report_type for row in types if row.paused),
        paused_tenants=frozenset(row.tenant for row in tenants if row.paused),
    )


async def publish_policy() -> None:
    """Push the policy MySQL holds to Redis (after a change, and every scheduler tick in case a change
    was made while Redis was away)."""
    await capacity.set_policy(await current_policy())


async def rebuild_dispatch() -> bool:
    """After a Redis flush: the policy and a slot held for every running job, from MySQL, so caps hold
    through the flush. Several workers may call this at once; one of them rebuilds."""
    async with session_scope() as session:
        repo = FairShareRepository(session)
        running = [
            Running(job_id, tenant, rtype, attempt_code(replay, attempt))
            for job_id, tenant, rtype, replay, attempt in await repo.running_jobs()
        ]
        policy = policy_of(await repo.tenant_policies(), await repo.type_policies())
    rebuilt = await capacity.rebuild_dispatch(running, policy)
    if rebuilt:
        log.warning("dispatch state rebuilt from MySQL (Redis was emptied)", extra={"running": len(running)})
    return rebuilt


async def release_slots(
    job_ids: Sequence[str],
    seen: Mapping[str, tuple[str, float]] | None = None,
    over: Mapping[str, int] | None = None,
) -> int:
    """Free the slots of jobs whose attempt was declared over by the scheduler (lost, cancelled); with
    `seen` (`slots_held` read before the attempts were declared over) only slots nothing took over since;
    `over` fences those attempts (`attempt_code`) off from a late start of their stalled workers."""
    return await capacity.release_slots(job_ids, seen, over)


# How long a started attempt keeps asking Redis for its slot before it hands itself back (Redis away).
HOLD_FOR_S = 10.0


@dataclass
class _HoldCall:
    """One started attempt's slot check in a batch; `withdrawn` once its caller was cancelled (a stopping
    worker hands the attempt back): from then on the batch does not send it."""

    hold: capacity.Hold
    withdrawn: bool = False


async def hold_slot(job: ReportJob, arq_id: str, token: str, lease_ms: int, attempt: int) -> str:
    """Right after the job's attempt (`attempt_code`) started: 'ok' (it holds its job's slot: run it),
    'over' (a flush took its slot and a cap is full now), 'superseded' (a later attempt holds the slot, or
    the stuck scan declared this one over), or 'unknown' (Redis did not answer for HOLD_FOR_S). Only 'ok'
    runs: a slot nobody could confirm may be counted by no one while other workers claim. The attempts a
    worker starts together are checked together (one round trip a batch, as their starts were committed);
    a cancelled caller's check is withdrawn unless its round trip is already under way."""
    call = _HoldCall(capacity.Hold(arq_id, token, queue.lane_of(job), lease_ms, attempt))
    try:
        return await _holds().submit(call)
    except asyncio.CancelledError:
        call.withdrawn = True
        raise


@cache
def _holds() -> GroupCommit[_HoldCall, str]:
    return GroupCommit(_flush_holds, get_settings().worker_group_commit_max_jobs)


def forget_holds() -> None:
    """Forget the hold batcher (tests change the settings between cases)."""
    _holds.cache_clear()


async def _flush_holds(calls: list[_HoldCall]) -> list[str | BaseException]:
    deadline = time.monotonic() + HOLD_FOR_S
    delay_s = 0.1
    while True:
        live = [call for call in calls if not call.withdrawn]
        if not live:
            return ["withdrawn"] * len(calls)
        try:
            answers = await capacity.hold_slots([call.hold for call in live])
            if answers is not None:
                by_call = {id(call): answer for call, answer in zip(live, answers, strict=True)}
                return [by_call.get(id(call), "withdrawn") for call in calls]
            await rebuild_dispatch()
            continue
        except Exception as exc:
            if time.monotonic() + delay_s > deadline:
                log.warning("slots not confirmed", extra={"jobs": len(calls), "error": repr(exc)})
                return ["unknown"] * len(calls)
        await asyncio.sleep(delay_s)
        delay_s = min(delay_s * 2, 2.0)


async def slots_held() -> dict[str, tuple[str, float]]:
    return await capacity.slots_held()


async def sweep_slots(older_than_s: float | None = None) -> list[str]:
    """Free slots held longer than `older_than_s` (STUCK_AFTER_S) by jobs MySQL says are not running:
    the worker that claimed them died before it started them, or the slot was rebuilt for a job that ended
    meanwhile. Their messages are dropped too; returns the jobs, for the reconciliation to enqueue afresh."""
    if older_than_s is None:
        older_than_s = get_settings().stuck_after_s
    held = await capacity.slots_held()
    cutoff_ms = time.time() * 1000 - older_than_s * 1000
    old = [job_id for job_id, (_, since_ms) in held.items() if since_ms <= cutoff_ms]
    if not old:
        return []
    async with session_scope() as session:
        running = await FairShareRepository(session).running_among(old)
    stale = [job_id for job_id in old if job_id not in running]
    if stale:
        log.warning("freeing slots of jobs that are not running", extra={"jobs": stale[:20]})
        await capacity.release_slots(stale, held)
    return stale


# ---- why a job waits ------------------------------------------------------------------------------------


def waiting_document(wait: Wait | None) -> dict[str, Any] | None:
    return wait.document() if wait is not None else None


async def waiting_for(jobs: Sequence[ReportJob]) -> list[dict[str, Any] | None]:
    """For each job still waiting to start (pending, or due and retrying): the pause or full cap that keeps
    it waiting now, or None. None everywhere when Redis cannot say."""
    waiting = [job.status in (JobStatus.PENDING, JobStatus.RETRYING) for job in jobs]
    lanes = [queue.lane_of(job) for job, wait in zip(jobs, waiting, strict=True) if wait]
    try:
        waits = iter(await capacity.explain_waits(lanes))
    except Exception as exc:
        log.warning("cannot tell why jobs wait: Redis unavailable", extra={"error": repr(exc)})
        return [None] * len(jobs)
    return [waiting_document(next(waits)) if wait else None for wait in waiting]


# ---- policy changes (admin) ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TenantView:
    tenant: str
    weight: int
    max_running: int | None  # the tenant's own cap (None: TENANT_MAX_RUNNING)
    effective_max_running: int | None
    paused: bool
    running: int


@dataclass(frozen=True)
class TypeView:
    report_type: str
    priority: int
    max_concurrency: TypeCap
    paused: bool
    running: int


async def list_tenants() -> list[TenantView]:
    async with session_scope() as session:
        rows = await FairShareRepository(session).tenant_policies()
    counts = await _running(BY_TENANT)
    names = sorted({row.tenant for row in rows} | set(counts))
    by_name = {row.tenant: row for row in rows}
    return [_tenant_view(name, by_name.get(name), counts.get(name, 0)) for name in names]


async def get_tenant(tenant: str) -> TenantView:
    async with session_scope() as session:
        row = await FairShareRepository(session).tenant_policy(tenant)
    return _tenant_view(tenant, row, (await _running(BY_TENANT)).get(tenant, 0))


async def set_tenant(tenant: str, values: dict[str, Any]) -> TenantView:
    """Change a tenant's weight, cap (None: back to the default) or pause, and tell the workers at once."""
    async with session_scope() as session:
        await FairShareRepository(session).set_tenant(tenant, values)
    await _publish_or_log()
    return await get_tenant(tenant)


async def list_types() -> list[TypeView]:
    async with session_scope() as session:
        rows = {row.report_type: row for row in await FairShareRepository(session).type_policies()}
    counts = await _running(BY_TYPE)
    return [_type_view(t.name, rows.get(t.name), counts.get(t.name, 0)) for t in registry.all()]


async def get_type(report_type: str) -> TypeView:
    if registry.get(report_type) is None:
        raise NotFound(f"No report type {report_type!r}.")
    async with session_scope() as session:
        row = await FairShareRepository(session).type_policy(report_type)
    return _type_view(report_type, row, (await _running(BY_TYPE)).get(report_type, 0))


async def set_type(report_type: str, values: dict[str, Any]) -> TypeView:
    """Change a report type's cap (None: back to the setting or the type's own) or pause; the workers
    obey at once: a paused type starts nothing new, its running jobs finish."""
    if registry.get(report_type) is None:
        raise NotFound(f"No report type {report_type!r}.")
    async with session_scope() as session:
        await FairShareRepository(session).set_type(report_type, values)
    await _publish_or_log()
    return await get_type(report_type)


async def _publish_or_log() -> None:
    try:
        await publish_policy()
    except Exception as exc:  # MySQL holds the change; the scheduler's next tick pushes it
        log.warning("policy not pushed to Redis; the next scheduler tick will", extra={"error": repr(exc)})


def _tenant_view(tenant: str, row: TenantPolicy | None, running: int) -> TenantView:
    return TenantView(
        tenant=tenant,
        weight=row.weight if row is not None else 1,
        max_running=row.max_running if row is not None else None,
        effective_max_running=tenant_cap(row),
        paused=bool(row is not None and row.paused),
        running=running,
    )


def _type_view(name: str, row: ReportTypePolicy | None, running: int) -> TypeView:
    return TypeView(
        report_type=name,
        priority=default_priority(name),
        max_concurrency=type_cap(name, row),
        paused=bool(row is not None and row.paused),
        running=running,
    )


async def _running(by: int) -> dict[str, int]:
    """Slots held now across every worker, by report type (`by` 0) or tenant (1); none if Redis is away."""
    try:
        return (await capacity.running_counts())[by]
    except Exception:
        return {}
