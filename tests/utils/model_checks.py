"""The dispatch model's invariants, checked against the truth after every step: MySQL's jobs and attempts, the
messages Redis holds, and what the model's workers carry (tests/utils/model_world.py).

Each invariant fails with its own exception type, so hypothesis tells the faults apart and shrinks each.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text

from app.core import redis_pool
from app.core.db import session_scope
from app.core.times import utcnow
from tests.utils.model_world import ENDED, FINISHING, RUNNING, STARTING, TENANTS, Delivery
from tests.utils.model_world_ops import World

# (a): a due job Redis does not hold is back by the end of this many reconcile ticks, unless its ordering key
# holds it back (`Snapshot.held_back`): its predecessor's end wakes it, and then the count starts
MISSING_TICKS = 1
FAIR_LAG = 3  # (e): how far one tenant's weighted claims may run ahead of the other's


class Violation(AssertionError):
    """An invariant of the dispatch machinery does not hold."""


class LostJob(Violation):
    """(a) A due job stayed out of Redis for more reconcile ticks than allowed."""


class TwoAttempts(Violation):
    """(b) Two attempts of one job running at once (in MySQL, or two live runners)."""


class RunnerDisowned(Violation):
    """(b) A live runner's attempt is no longer the job's running attempt."""


class TwoMessages(Violation):
    """(b) Two messages of one job in Redis: either may run it, and only one holds its slot."""


class CapExceeded(Violation):
    """(c) More jobs running than a cap allows."""


class Uncounted(Violation):
    """(c) A job running in MySQL holds no slot in Redis: the caps no longer count it."""


class OrderBroken(Violation):
    """(d) Two jobs of one ordering key running at once, or one started before a predecessor finished."""


class Starved(Violation):
    """(e) A tenant with claimable work got less than half its weighted share of the claims."""


class Stranded(Violation):
    """(f) A job running in MySQL that no runner holds, or dead without ever having run (its worker alive)."""


class WorkerCrashed(Violation):
    """An error escaped a delivery: arq raises it in the worker's main loop and the process ends."""


@dataclass(frozen=True)
class JobRow:
    id: str
    tenant: str
    report_type: str
    status: str
    attempt: int
    replay: int
    ordering_key: str | None
    next_attempt_at: datetime | None
    run_at: datetime | None
    resolved_at: datetime | None
    ordering_seq: int | None = None
    on_predecessor_dead: str = "wait"


UNFINISHED = ("pending", "retrying", "scheduled", "running")


@dataclass(frozen=True)
class Snapshot:
    now: datetime  # naive UTC, as MySQL stores times
    jobs: dict[str, JobRow]
    running_attempts: Counter[str]
    in_lanes: frozenset[str]  # jobs with a message (that still exists) waiting in a lane
    history: dict[str, list[str]]  # each job's attempts, oldest first (for the failure messages)
    slots: dict[str, str] | None  # job id → the message holding its slot; None while not rebuilt (a flush)
    messages: dict[str, list[str]]  # job id → the arq ids of its messages Redis holds (one at most)

    def due(self, job: JobRow) -> bool:
        if job.status == "pending":
            return True
        if job.status == "retrying":
            return job.next_attempt_at is not None and job.next_attempt_at <= self.now
        return job.status == "scheduled" and job.run_at is not None and job.run_at <= self.now

    def running(self) -> list[JobRow]:
        return [job for job in self.jobs.values() if job.status == "running"]

    def held_back(self, job: JobRow) -> bool:
        """The ordering rule, from the rows: another job of its key runs, or one placed before it has not
        finished (or is dead, unresolved, and it does not run past dead ones). Such a job need not hold a
        message: its predecessor's end wakes it."""
        if job.ordering_key is None:
            return False
        for other in self.jobs.values():
            if other.id == job.id or (other.tenant, other.ordering_key) != (job.tenant, job.ordering_key):
                continue
            if other.status == "running":
                return True
            if (
                other.ordering_seq is None
                or job.ordering_seq is None
                or other.ordering_seq >= job.ordering_seq
            ):
                continue
            dead_holds = other.status == "dead" and other.resolved_at is None
            if other.status in UNFINISHED or (dead_holds and job.on_predecessor_dead != "continue"):
                return True
        return False


async def snapshot() -> Snapshot:
    now = utcnow().replace(tzinfo=None)
    async with session_scope() as session:
        rows = await session.execute(
            text(
                "SELECT id, tenant, report_type, status, attempt, replay_count, ordering_key, "
                "next_attempt_at, run_at, resolved_at, ordering_seq, on_predecessor_dead FROM report_jobs"
            )
        )
        jobs = {row[0]: JobRow(*row) for row in rows}
        history: dict[str, list[str]] = {}
        attempts: Counter[str] = Counter()
        for job_id, number, outcome, worker, error in await session.execute(
            text("SELECT job_id, attempt, outcome, worker, error FROM job_attempts ORDER BY id")
        ):
            parsed = json.loads(error) if isinstance(error, str) else error
            kind = f" {parsed.get('type')}" if isinstance(parsed, dict) else ""
            history.setdefault(job_id, []).append(f"#{number} {outcome}{kind} by {worker}")
            attempts[job_id] += outcome == "running"
    pool = await redis_pool.get_pool()
    lane_keys = [key async for key in pool.scan_iter(match="ro:d:lane:*")]
    async with pool.pipeline(transaction=False) as pipe:
        for key in lane_keys:
            pipe.zrange(key, 0, -1)
        members = [_text(m) for found in await pipe.execute() for m in found]
    async with pool.pipeline(transaction=False) as pipe:
        for arq_id in members:
            pipe.exists(f"arq:job:{arq_id}")
        alive = await pipe.execute()
    held = frozenset(arq_id.split(":")[0] for arq_id, exists in zip(members, alive, strict=True) if exists)
    messages: dict[str, list[str]] = {}
    async for key in pool.scan_iter(match="arq:job:*"):
        arq_id = _text(key).removeprefix("arq:job:")
        if arq_id.split(":")[0] in jobs:  # a job's run message, not the failed channel's (`dl:{job}`)
            messages.setdefault(arq_id.split(":")[0], []).append(arq_id)
    slots = None
    if await pool.exists("ro:d:ready"):
        slots = {_text(k): _text(v).split("\t")[0] for k, v in (await pool.hgetall("ro:d:claims")).items()}
    return Snapshot(now, jobs, attempts, held, history, slots, messages)


async def claimable_tenants(now_ms: float) -> set[str]:
    """Tenants the claim could serve now: a due lane head of an open tenant and type with a free slot."""
    pool = await redis_pool.get_pool()
    paused = {_text(name) for name in await pool.smembers("ro:d:paused")}
    type_caps = _ints(await pool.hgetall("ro:d:cap:type"))
    tenant_caps = _ints(await pool.hgetall("ro:d:cap:tenant"))
    default_cap = int(await pool.get("ro:d:cap:tenant_default") or 0)
    by_type = _ints(await pool.hgetall("ro:d:run:type"))
    by_tenant = _ints(await pool.hgetall("ro:d:run:tenant"))
    found = set()
    async for key in pool.scan_iter(match="ro:d:lane:*"):
        _, tenant, report_type = _text(key).removeprefix("ro:d:lane:").split("\t")
        if f"tenant\t{tenant}" in paused or f"type\t{report_type}" in paused:
            continue
        type_cap = type_caps.get(report_type, 0)
        tenant_cap = tenant_caps.get(tenant, default_cap)
        if (type_cap and by_type.get(report_type, 0) >= type_cap) or (
            tenant_cap and by_tenant.get(tenant, 0) >= tenant_cap
        ):
            continue
        head = await pool.zrange(key, 0, 0, withscores=True)
        if head and head[0][1] <= now_ms:
            found.add(tenant)
    return found


# ---- the invariants -------------------------------------------------------------------------------------


def check_every_step(world: World, snap: Snapshot) -> None:
    """(b), (d) and (f) on the current state, then (c) and (d) for the reports that began this step."""
    if world.crashes:
        raise WorkerCrashed(f"a delivery raised out of arq's run_job: {world.crashes}")
    check_one_attempt(world, snap)
    check_one_message(snap)
    check_runners_held(world, snap)
    check_one_per_key(snap)
    check_running_counted(world, snap)
    entered, world.entered_now = world.entered_now, []
    for delivery in entered:
        check_caps(world, snap, delivery)
        check_predecessors(world, snap, delivery)


def check_one_message(snap: Snapshot) -> None:
    twice = {job_id: sorted(ids) for job_id, ids in snap.messages.items() if len(ids) > 1}
    if twice:
        raise TwoMessages(f"jobs with more than one message in Redis: {twice}")


def check_one_attempt(world: World, snap: Snapshot) -> None:
    twice = {job_id: n for job_id, n in snap.running_attempts.items() if n > 1}
    if twice:
        raise TwoAttempts(f"jobs with more than one running attempt row: {twice}")
    live = Counter(d.job_id for d in world.runners())
    if any(n > 1 for n in live.values()):
        raise TwoAttempts(
            f"two live runners of one job: {[d for d in world.runners() if live[d.job_id] > 1]}"
        )
    if world.taken:
        raise RunnerDisowned(f"a live runner's heartbeat was told its attempt is over: {world.taken}")
    for delivery in world.runners():
        job = snap.jobs.get(delivery.job_id)
        if job is None or (job.status, job.attempt, job.replay) != (
            "running",
            delivery.attempt,
            delivery.replay,
        ):
            raise RunnerDisowned(
                f"{delivery!r} runs attempt {delivery.attempt}, but MySQL has {job}; "
                f"attempts: {snap.history.get(delivery.job_id)}"
            )


def _holds(delivery: Delivery, job: JobRow) -> bool:
    if delivery.job_id != job.id or delivery.state == ENDED:
        return False
    if delivery.state in (RUNNING, FINISHING):
        return (delivery.attempt, delivery.replay) == (job.attempt, job.replay)
    # A start cut short by its process's death: committed or not, nobody knows.
    return delivery.state == STARTING and delivery.dead and delivery.gate.is_set()


def check_runners_held(world: World, snap: Snapshot) -> None:
    for job in snap.running():
        if not any(_holds(d, job) for d in world.deliveries):
            mine = [d for d in world.deliveries if d.job_id == job.id]
            raise Stranded(
                f"job {job.id} is running (attempt {job.attempt}) in MySQL but no runner holds it; "
                f"its deliveries: {mine}; attempts: {snap.history.get(job.id)}"
            )
    for job in snap.jobs.values():
        if job.status == "dead" and job.id not in world.ran and job.id not in world.orphaned:
            raise Stranded(
                f"job {job.id} is dead although it never ran and no worker carrying it died; "
                f"attempts: {snap.history.get(job.id)}"
            )


def check_one_per_key(snap: Snapshot) -> None:
    keys = Counter((job.tenant, job.ordering_key) for job in snap.running() if job.ordering_key)
    twice = [key for key, n in keys.items() if n > 1]
    if twice:
        raise OrderBroken(f"two jobs of one ordering key running at once: {twice}")


def check_running_counted(world: World, snap: Snapshot) -> None:
    """Once the dispatch state is built, every running job holds a slot (caps and fair share count it). A
    start whose claim was made before a flush is not held against this (the rebuild could not know it)."""
    if snap.slots is None:
        return
    excused = {d.job_id for d in world.deliveries if d.flush_epoch != world.flush_epoch}
    for job in snap.running():
        if job.id not in snap.slots and job.id not in excused:
            mine = [d for d in world.deliveries if d.job_id == job.id]
            raise Uncounted(
                f"job {job.id} ({job.report_type}, tenant {job.tenant}) runs but holds no slot; "
                f"its deliveries: {mine}; attempts: {snap.history.get(job.id)}"
            )


def check_caps(world: World, snap: Snapshot, delivery: Delivery) -> None:
    """A start obeys the caps in force when its message was claimed (a cap changed or Redis flushed in
    between is not held against it)."""
    job = snap.jobs.get(delivery.job_id)
    if (
        job is None
        or delivery.policy_epoch != world.policy_epoch
        or delivery.flush_epoch != world.flush_epoch
    ):
        return
    cap = world.policy.cap_of(job.report_type)
    same_type = [j.id for j in snap.running() if j.report_type == job.report_type]
    if cap is not None and len(same_type) > cap:
        raise CapExceeded(f"{len(same_type)} jobs of {job.report_type} running, cap {cap}: {same_type}")
    tenant_cap = world.policy.tenant_caps.get(job.tenant)
    same_tenant = [j.id for j in snap.running() if j.tenant == job.tenant]
    if tenant_cap is not None and len(same_tenant) > tenant_cap:
        raise CapExceeded(f"{len(same_tenant)} jobs of tenant {job.tenant} running, cap {tenant_cap}")


def check_predecessors(world: World, snap: Snapshot, delivery: Delivery) -> None:
    """A job of an ordering key starts only once every job of its key submitted before it (answered before
    its own submit began) is done or cancelled."""
    mine = world.submitted.get(delivery.job_id)
    if mine is None or mine.ordering_key is None:
        return
    for job_id, other in world.submitted.items():
        if (other.tenant, other.ordering_key) != (
            mine.tenant,
            mine.ordering_key,
        ) or other.answered >= mine.began:
            continue
        before = snap.jobs.get(job_id)
        if before is not None and not (
            before.status in ("done", "cancelled") or (before.status == "dead" and before.resolved_at)
        ):
            raise OrderBroken(f"{delivery.job_id} started while its predecessor {job_id} is {before.status}")


class MissingTracker:
    """(a): how many reconcile ticks in a row each due job ended missing from Redis."""

    def __init__(self) -> None:
        self.ticks: dict[str, int] = {}

    def after_tick(self, world: World, snap: Snapshot) -> None:
        parked = {d.job_id for d in world.parked()}
        missing = {
            job.id
            for job in snap.jobs.values()
            if snap.due(job) and job.id not in snap.in_lanes | parked and not snap.held_back(job)
        }
        self.ticks = {job_id: self.ticks.get(job_id, 0) + 1 for job_id in missing}
        late = {job_id: n for job_id, n in self.ticks.items() if n >= MISSING_TICKS}
        if late:
            statuses = {job_id: snap.jobs[job_id].status for job_id in late}
            raise LostJob(f"due jobs out of Redis for {MISSING_TICKS}+ reconcile ticks: {statuses}")


class FairnessTracker:
    """(e): over a stretch of claims during which both tenants had claimable work, each tenant's claims per
    unit of weight stay within FAIR_LAG of the other's (weighted fair share keeps them within about one)."""

    def __init__(self) -> None:
        self.served: Counter[str] = Counter()
        self.stretch: list[str] = []

    def reset(self) -> None:
        self.served, self.stretch = Counter(), []

    def record(self, claimable: set[str], served: str | None, weights: dict[str, int]) -> None:
        if served is None:
            return
        if not set(TENANTS) <= claimable:
            self.reset()  # one tenant had nothing to claim: a new stretch begins at the next shared claim
            return
        self.served[served] += 1
        self.stretch.append(served)
        per_weight = {t: self.served[t] / weights.get(t, 1) for t in TENANTS}
        ahead, behind = max(per_weight, key=per_weight.get), min(per_weight, key=per_weight.get)  # type: ignore[arg-type]
        if per_weight[ahead] - per_weight[behind] > FAIR_LAG:
            raise Starved(
                f"tenant {behind} (weight {weights.get(behind, 1)}) fell {FAIR_LAG}+ weighted claims behind "
                f"{ahead} (weight {weights.get(ahead, 1)}) while both had claimable work: {self.stretch}"
            )


def _ints(raw: dict[bytes, bytes]) -> dict[str, int]:
    return {_text(name): int(value) for name, value in raw.items()}


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
