"""Fairness phase (issue 16), 2 worker processes of ours at the shipped WORKER_MAX_JOBS:

1. A small tenant behind a big one: tenant A queues FAIRNESS_A_JOBS no-op jobs (in-process bulk submit), the
   workers start draining them, and once they run steadily tenant B submits FAIRNESS_B_JOBS. B's worst wait
   while A has a backlog, in job slots = A's jobs started between B's submit and B's last start ÷ the
   workers' slots (and in ms); under a plain time-ordered queue B would wait for A's whole backlog.
   Every start is read from MySQL (job_attempts.started_at joined with report_jobs.tenant).
2. Drain throughput with and without a report-type cap in the same run: DRAIN_JOBS no-op jobs drained with
   no cap, with a cap ≥ the slots (never binding), and with a binding cap, in the order none, not
   binding, binding, not binding, none, so that drift on the machine weighs on both sides alike.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from datetime import UTC, datetime
from typing import Any

from bench.common import (
    DRAIN_JOBS,
    DRAIN_TIMEOUT_S,
    FAIRNESS_A_JOBS,
    FAIRNESS_B_JOBS,
    FAIRNESS_B_TENANT,
    STALL_S,
    TENANT,
    log,
)
from bench.context import Bench
from bench.phases.drain import DRAIN_WORKERS, drain_ours, watch
from bench.procs import Proc

NOOP = "bench.noop"
POLL_S = 0.02
CAP_ORDER = ("none", "not_binding", "binding", "not_binding", "none")


def worker_max_jobs(bench: Bench) -> int:
    """The slots of one worker: WORKER_MAX_JOBS as the workers will read it (the shipped default unless the
    environment sets it)."""
    from app.core.config import Settings

    raw = bench.env.get("WORKER_MAX_JOBS")
    return int(raw) if raw else int(Settings.model_fields["worker_max_jobs"].default)


def utc(value: datetime) -> datetime:
    """MySQL's DATETIME(6) holds naive UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


async def attempt_rows(bench: Bench) -> list[tuple[str, datetime, datetime | None]]:
    """(tenant, started_at, finished_at) of every attempt, in start order."""
    from sqlalchemy import text

    sql = (
        "SELECT j.tenant, a.started_at, a.finished_at FROM job_attempts a "
        "JOIN report_jobs j ON j.id = a.job_id ORDER BY a.started_at, a.id"
    )
    async with bench.db.connect() as conn:
        rows = (await conn.execute(text(sql))).all()
    return [(str(r[0]), utc(r[1]), utc(r[2]) if r[2] is not None else None) for r in rows]


def most_at_once(spans: list[tuple[datetime, datetime | None]]) -> int:
    """The most attempts running at the same moment (a start at the very moment of a finish not counted)."""
    events: list[tuple[datetime, int]] = []
    for started, finished in spans:
        events.append((started, 1))
        if finished is not None:
            events.append((finished, -1))
    events.sort(key=lambda e: (e[0], e[1]))  # finishes before starts at the same instant
    running = most = 0
    for _, delta in events:
        running += delta
        most = max(most, running)
    return most


async def started_count(bench: Bench) -> int:
    return int(await bench.scalar("SELECT COUNT(*) FROM job_attempts") or 0)


async def wait_started(bench: Bench, at_least: int, procs: list[Proc]) -> int:
    """Poll until `at_least` attempts started; raise if a worker died or nothing moves."""
    began = last_change = time.perf_counter()
    last = -1
    while True:
        count = await started_count(bench)
        if count >= at_least:
            return count
        now = time.perf_counter()
        if count != last:
            last, last_change = count, now
        for proc in procs:
            if not proc.alive():
                raise RuntimeError(f"{proc.name} exited during the fairness run:\n{proc.tail()}")
        if now - began > DRAIN_TIMEOUT_S or now - last_change > STALL_S:
            raise RuntimeError(f"fairness: stuck at {count}/{at_least} started")
        await asyncio.sleep(POLL_S)


async def submit_b(count: int) -> None:
    """Tenant B's jobs, one bulk submit (as POST /v1/jobs/batch does it), in-process like tenant A's."""
    from app.jobs.batch import BatchEntry, submit_batch
    from app.jobs.service import SubmitRequest

    req = SubmitRequest(report_type=NOOP, params={})
    outcomes = await submit_batch(FAIRNESS_B_TENANT, [BatchEntry(req)] * count)
    refused = [o for o in outcomes if isinstance(o, Exception)]
    if refused:
        raise RuntimeError(f"tenant B's submit refused {len(refused)} of {count}: {refused[0]!r}")


async def scenario(bench: Bench, workers: int, max_jobs: int) -> dict[str, Any]:
    """A's backlog draining, B submits: how many of A's jobs start before the last of B's."""
    slots = workers * max_jobs
    a_jobs, b_jobs = FAIRNESS_A_JOBS, FAIRNESS_B_JOBS
    # B arrives once the workers run steadily, with most of A's backlog still waiting.
    b_after = min(max(2 * slots, a_jobs // 10), a_jobs // 2)
    await bench.clean()
    await bench.submit_many(a_jobs)
    procs = [bench.spawn_worker(f"worker-fair-{i}", WORKER_MAX_JOBS=str(max_jobs)) for i in range(workers)]
    try:
        a_started_before = await wait_started(bench, b_after, procs)
        submitted_at = datetime.now(UTC)
        await submit_b(b_jobs)
        queued_at = datetime.now(UTC)  # B's jobs committed and in their lanes
        drained = await watch(bench.done_count, a_jobs + b_jobs, procs, 0.05)
    finally:
        for proc in procs:
            proc.stop()
    rows = await attempt_rows(bench)
    b_starts = [s for tenant, s, _ in rows if tenant == FAIRNESS_B_TENANT]
    a_starts = [s for tenant, s, _ in rows if tenant == TENANT]
    if len(b_starts) != b_jobs or len(a_starts) != a_jobs:
        raise RuntimeError(f"fairness: {len(a_starts)} of A's and {len(b_starts)} of B's attempts in MySQL")
    first_b, last_b = min(b_starts), max(b_starts)
    a_meanwhile = sum(1 for s in a_starts if submitted_at < s <= last_b)
    a_after_queued = sum(1 for s in a_starts if queued_at < s <= last_b)
    a_backlog_at_submit = sum(1 for s in a_starts if s > submitted_at)
    a_backlog_at_last_b = sum(1 for s in a_starts if s > last_b)
    return {
        "tenant_a_jobs": a_jobs,
        "tenant_b_jobs": b_jobs,
        "workers": workers,
        "worker_max_jobs": max_jobs,
        "slots": slots,
        "a_started_when_b_submitted": a_started_before,
        "b_submit_ms": (queued_at - submitted_at).total_seconds() * 1000,
        # From just before B's submit call (as issue 16's test counts), so the submit's own time counts …
        "a_started_meanwhile": a_meanwhile,
        "b_wait_slots": a_meanwhile / slots,
        # … and from the moment the submit returned, B's jobs waiting in their lanes: the dispatch alone.
        "a_started_after_b_queued": a_after_queued,
        "b_wait_slots_after_queued": a_after_queued / slots,
        "b_worst_wait_ms": (last_b - submitted_at).total_seconds() * 1000,
        "b_first_wait_ms": (first_b - submitted_at).total_seconds() * 1000,
        "a_backlog_at_b_submit": a_backlog_at_submit,
        "fifo_wait_slots": a_backlog_at_submit / slots,
        "a_backlog_at_b_last_start": a_backlog_at_last_b,
        # The figure means "while A has a backlog" only if A still had jobs waiting when B's last one started.
        "a_had_backlog": a_backlog_at_last_b > 0,
        "drain_jobs_per_s": drained["jobs_per_s"],
    }


async def capped_drain(bench: Bench, workers: int, kind: str, cap: int | None, run: int) -> dict[str, Any]:
    """One drain of DRAIN_JOBS by `workers` of ours, with the report type capped at `cap` (None: no cap);
    the cap Redis held and the most attempts seen running at once go with the figures."""
    label = f"cap-{kind}-{run}-"
    if cap is None:
        result = await drain_ours(bench, workers, DRAIN_JOBS, label)
    else:
        caps = json.dumps({NOOP: cap})
        result = await drain_ours(bench, workers, DRAIN_JOBS, label, REPORT_TYPE_MAX_CONCURRENCY=caps)
    held = await bench.rds.hget("ro:d:cap:type", NOOP)
    result["cap"] = cap
    result["cap_in_redis"] = int(held) if held is not None else None
    result["most_running_at_once"] = most_at_once([(s, f) for _, s, f in await attempt_rows(bench)])
    if result["cap_in_redis"] != cap:
        raise RuntimeError(f"fairness: type cap {cap} asked, Redis held {result['cap_in_redis']}")
    return result


def mean_rate(runs: list[dict[str, Any]]) -> float:
    return statistics.fmean(r["jobs_per_s"] for r in runs)


async def caps(bench: Bench, workers: int, max_jobs: int) -> dict[str, Any]:
    slots = workers * max_jobs
    cap_of: dict[str, int | None] = {"none": None, "not_binding": slots, "binding": max(1, slots // 4)}
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in cap_of}
    for i, kind in enumerate(CAP_ORDER):
        result = await capped_drain(bench, workers, kind, cap_of[kind], i)
        runs[kind].append(result)
        cap = "no cap" if cap_of[kind] is None else f"type cap {cap_of[kind]}"
        log(f"  drain, {cap} ({slots} slots): {result['jobs_per_s']:,.0f} jobs/s, "
            f"at most {result['most_running_at_once']} running at once")  # fmt: skip
    rates = {kind: mean_rate(r) for kind, r in runs.items()}
    return {
        "jobs": DRAIN_JOBS,
        "workers": workers,
        "slots": slots,
        "order": list(CAP_ORDER),
        "caps": cap_of,
        "jobs_per_s": rates,
        "not_binding_vs_none": rates["not_binding"] / rates["none"],
        "binding_vs_none": rates["binding"] / rates["none"],
        "binding_most_running_at_once": max(r["most_running_at_once"] for r in runs["binding"]),
        "runs": runs,
    }


async def run(bench: Bench) -> None:
    w = DRAIN_WORKERS
    max_jobs = worker_max_jobs(bench)
    slots = w * max_jobs
    log(f"fairness: tenant A queues {FAIRNESS_A_JOBS:,} no-op jobs, {w} workers × {max_jobs} slots drain "
        f"them, tenant B submits {FAIRNESS_B_JOBS}; then {DRAIN_JOBS:,}-job drains with and without a "
        "report-type cap")  # fmt: skip
    fair = await scenario(bench, w, max_jobs)
    log(f"  B's worst wait: {fair['a_started_meanwhile']} of A's jobs started = {fair['b_wait_slots']:.2f} "
        f"slots of {slots} ({fair['b_worst_wait_ms']:.0f} ms; its submit took {fair['b_submit_ms']:.0f} ms, "
        f"{fair['b_wait_slots_after_queued']:.2f} slots from then); a time-ordered queue: "
        f"{fair['fifo_wait_slots']:.1f} slots; A's backlog left at B's last start: "
        f"{fair['a_backlog_at_b_last_start']}")  # fmt: skip
    capped = await caps(bench, w, max_jobs)
    log(f"  cap ≥ slots ÷ no cap: {capped['not_binding_vs_none']:.3f}; binding cap "
        f"{capped['caps']['binding']} ÷ no cap: {capped['binding_vs_none']:.3f}")  # fmt: skip
    bench.results["fairness"] = {"scenario": fair, "caps": capped}
