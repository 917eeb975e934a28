"""The scheduler's periodic work as plain async functions: rescue lost attempts, reconcile Redis with
MySQL, re-publish pending alerts, archive dead letters, purge expired jobs and their files, and forget
worker-registry rows silent for a day.

Every action is idempotent (CAS updates, one message per job in Redis); a Redis lease just keeps replicas
from doing the same work in the same tick.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from app.attempts.rescue import declare_lost
from app.callbacks.service import republish_due
from app.core import redis_pool
from app.core.config import get_settings
from app.core.db import session_scope
from app.core.times import utcnow
from app.dead_letters.service import archive_and_purge, republish_pending
from app.fairshare import service as fairshare
from app.fleet import service as fleet
from app.maintenance.reconcile import grace_s, reconcile, reconcile_jobs
from app.maintenance.repository import MaintenanceRepository
from app.outputs import get_output_store
from app.outputs.base import OutputStoreUnavailable

log = logging.getLogger(__name__)

PURGE_BATCH = 500


async def purge_expired_jobs() -> int:
    """Delete expired jobs with their files. Files go first: a job whose files could not be deleted (the
    object store is down) keeps its row, so the next tick tries again and no object is ever orphaned."""
    settings = get_settings()
    now = utcnow()
    cutoff = now - timedelta(seconds=settings.job_retention_s)
    idempotent_cutoff = now - timedelta(seconds=settings.idempotency_ttl_s)
    async with session_scope() as session:
        ids = await MaintenanceRepository(session).expired_job_ids(cutoff, idempotent_cutoff, PURGE_BATCH)
    store = get_output_store()
    gone: list[str] = []
    for job_id in ids:
        try:
            await store.delete_job(job_id)
        except OutputStoreUnavailable:
            log.warning("retention: output store unavailable; expired jobs kept until the next tick")
            break
        gone.append(job_id)
    if not gone:
        return 0
    async with session_scope() as session:
        repo = MaintenanceRepository(session)
        # Still expired (a replay in between brought a cancelled job back to life): only those go.
        still = set(await repo.expired_job_ids(cutoff, idempotent_cutoff, PURGE_BATCH)) & set(gone)
        if still:
            await repo.delete_jobs(sorted(still))
    return len(still)


async def run_tick(use_lease: bool = True) -> dict[str, Any]:
    settings = get_settings()
    report: dict[str, Any] = {}
    if use_lease:
        try:
            # Kept until it expires, so other replicas skip this tick.
            lease_s = max(0.05, settings.scan_interval_s * 0.8)
            if await redis_pool.try_lock("scheduler-tick", ttl_s=lease_s) is None:
                return {"skipped": "another scheduler replica holds this tick"}
        except Exception as exc:  # Redis down: the MySQL-side work is idempotent and still safe to do
            report["redis"] = f"unavailable: {type(exc).__name__}"
    report["lost"] = await declare_lost(settings.stuck_after_s)
    try:
        await fairshare.publish_policy()
        freed = await fairshare.sweep_slots()
        report["slots_freed"] = len(freed)
        report["reenqueued"] = await reconcile_jobs(freed) + await reconcile()
        report["alerts_republished"] = await republish_pending(grace_s())
        report["callbacks_republished"] = await republish_due()
    except Exception as exc:
        report["redis"] = f"unavailable: {type(exc).__name__}"
    report.update(await archive_and_purge())
    report["jobs_purged"] = await purge_expired_jobs()
    report["workers_purged"] = await fleet.purge_gone(fleet.PURGE_GONE_AFTER_S)
    return report
