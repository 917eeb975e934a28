"""The soak: real api, worker, dead-letter and scheduler processes (tests/utils/stack.py) on their own MariaDB
and Redis, fed over the HTTP API while seeded faults hit them: failpoints (RO_FAILPOINTS), SIGKILLed workers,
FLUSHALL, paused tenants and types, a MariaDB restart. Its invariants (tests/utils/soak_checks.py) are checked
while it runs and once the faults stop and every job has drained.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.utils import soak_checks as checks
from tests.utils.stack import SCAN_INTERVAL_S, STUCK_AFTER_S, Proc, Stack

TENANTS = ("t1", "t2")
CAPS = {"demo.sleep": 2}  # the capped report type the soak checks
TENANT_CAPS = {"t2": 4}
WEIGHTS = {"t1": 2}
# Failpoints of the worker and API processes: (point, action) with a probability each hit.
WORKER_FAILPOINTS = (
    "group_start.before_commit=deadlock@0.04;group_start.after_commit=kill@0.002;"
    "group_success.before_commit=outage@0.03;finish.before_record=kill@0.002;claim.after_claim=kill@0.002"
)
API_FAILPOINTS = "submit.after_commit=outage@0.03"
# The load: about 10 jobs/s in all (two submitters of 1-3 jobs a pause, four chains of one a pause), which
# three workers keep up with through the faults on a 2-core machine, the capped type (cap 2, under 0.2 s a
# job: 20 jobs/s) included. A load above what they can do ends in a backlog the drain cannot tell from
# stranded jobs; the soak checks that nothing is lost or stranded, not how far it can be pushed (make bench).
SUBMIT_PAUSE_S = (0.3, 0.9)
CHAIN_PAUSE_S = (0.5, 2.0)
DRAIN_IDLE_S = 30.0
DRAIN_MAX_S = 600.0
WATCH_S = 30.0
CHECK_EVERY_S = 10.0


@dataclass
class SoakPlan:
    seconds: float
    seed: int
    workers: int = 3
    mariadb_restarts: bool = True


@dataclass
class SoakLog:
    """What the faults did, for the checks (a kill explains a lost attempt, an outage a missed beat)."""

    killed: set[int] = field(default_factory=set)
    flushes: list[datetime] = field(default_factory=list)
    outages: list[tuple[datetime, datetime]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    chains: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    continues: set[tuple[str, str]] = field(default_factory=set)  # chains whose jobs go on past a dead one

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1


class Soak:
    def __init__(self, stack: Stack, plan: SoakPlan) -> None:
        self.stack = stack
        self.plan = plan
        self.rng = random.Random(plan.seed)
        self.log = SoakLog()
        self.findings = checks.SoakFindings()
        self.workers: list[Proc] = []
        self.keys: dict[str, str] = {}
        self.stop = asyncio.Event()
        self.db_down = asyncio.Event()
        self.moving: set[str] = set()  # leftovers of the drain seen moving (watch_leftovers)

    # ---- the run --------------------------------------------------------------------------------------

    async def run(self) -> checks.SoakFindings:
        stack = self.stack
        faults = {"RO_FAILPOINTS_SEED": str(self.plan.seed)}
        stack.start_api(RO_FAILPOINTS=API_FAILPOINTS, **faults)
        self.workers = [
            stack.start_worker(RO_FAILPOINTS=WORKER_FAILPOINTS, **faults) for _ in range(self.plan.workers)
        ]
        stack.start_dead_letter()
        stack.start_scheduler()
        self.keys = {tenant: stack.create_key(tenant, "jobs:read,jobs:write") for tenant in TENANTS}
        await self.set_policy()
        tasks = (
            [asyncio.create_task(self.submitter(tenant)) for tenant in TENANTS]
            + [asyncio.create_task(self.chain(tenant, n)) for tenant in TENANTS for n in range(2)]
            + [
                asyncio.create_task(self.chaos()),
                asyncio.create_task(self.supervisor()),
                asyncio.create_task(self.sampler()),
                asyncio.create_task(self.periodic_checks()),
            ]
        )
        try:
            await asyncio.sleep(self.plan.seconds)
        finally:
            self.stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.drain()
        await asyncio.to_thread(self.final_checks)
        return self.findings

    async def set_policy(self) -> None:
        async with self.stack.client() as admin:
            for name, cap in CAPS.items():
                await _ok(admin.patch(f"/v1/report-types/{name}", json={"max_concurrency": cap}))
            for tenant in TENANTS:
                body: dict[str, Any] = {"weight": WEIGHTS.get(tenant, 1)}
                if tenant in TENANT_CAPS:
                    body["max_running"] = TENANT_CAPS[tenant]
                await _ok(admin.patch(f"/v1/tenants/{tenant}", json=body))

    # ---- load -----------------------------------------------------------------------------------------

    def client(self, tenant: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.stack.api_url,
            headers={"Authorization": f"Bearer {self.keys[tenant]}"},
            timeout=15.0,
            trust_env=False,
        )

    def body(self) -> dict[str, Any]:
        rng = self.rng
        kind = rng.random()
        if kind < 0.4:
            body: dict[str, Any] = {"report_type": "demo.sleep", "params": {"seconds": rng.uniform(0, 0.2)}}
        elif kind < 0.75:
            flaky = {"fail_times": rng.choice([0, 0, 1, 2]), "permanent": rng.random() < 0.05}
            body = {"report_type": "demo.flaky", "params": flaky}
        else:
            body = {"report_type": "demo.csv", "params": {"rows": rng.randint(1, 20)}}
        if rng.random() < 0.1:
            body["run_at"] = (datetime.now(UTC) + timedelta(seconds=rng.uniform(0.5, 3))).isoformat()
        return body

    async def submit(self, client: httpx.AsyncClient, body: dict[str, Any]) -> str | None:
        """One POST /v1/jobs; None when the API could not take it (503: MySQL away, or a failpoint)."""
        try:
            resp = await client.post("/v1/jobs", json=body)
        except httpx.HTTPError:
            self.log.count("submit: no answer")
            return None
        if resp.status_code == 202:
            self.log.count("submitted")
            return str(resp.json()["id"])
        if resp.status_code >= 500 and resp.status_code != 503:
            self.findings.add(f"POST /v1/jobs answered {resp.status_code}: {resp.text[:300]}")
        self.log.count(f"submit: {resp.status_code}")
        return None

    async def submitter(self, tenant: str) -> None:
        """Plain jobs, and now and then a burst of one ordering key submitted all at once."""
        async with self.client(tenant) as client:
            while not self.stop.is_set():
                if self.rng.random() < 0.08:
                    key = {"ordering_key": f"burst-{tenant}"}
                    await asyncio.gather(*(self.submit(client, {**self.body(), **key}) for _ in range(3)))
                else:
                    await asyncio.gather(
                        *(self.submit(client, self.body()) for _ in range(self.rng.randint(1, 3)))
                    )
                await asyncio.sleep(self.rng.uniform(*SUBMIT_PAUSE_S))

    async def chain(self, tenant: str, n: int) -> None:
        """Jobs of one ordering key submitted one after the other: they must run in this order. Chain 0 waits
        behind a dead job (for good, as nobody resolves it); chain 1 goes on past it."""
        key = f"chain-{tenant}-{n}"
        order = self.log.chains.setdefault((tenant, key), [])
        on_dead = "wait" if n == 0 else "continue"
        if on_dead == "continue":
            self.log.continues.add((tenant, key))
        async with self.client(tenant) as client:
            while not self.stop.is_set():
                body = {**self.body(), "ordering_key": key, "on_predecessor_dead": on_dead}
                job_id = await self.submit(client, body)
                if job_id is not None:
                    order.append(job_id)
                await asyncio.sleep(self.rng.uniform(*CHAIN_PAUSE_S))

    # ---- faults ---------------------------------------------------------------------------------------

    async def chaos(self) -> None:
        next_restart = time.monotonic() + self.rng.uniform(15, 30)
        while not self.stop.is_set():
            await asyncio.sleep(self.rng.uniform(0.8, 2.5))
            if self.stop.is_set():
                return
            if self.plan.mariadb_restarts and time.monotonic() > next_restart:
                await self.restart_mariadb()
                next_restart = time.monotonic() + self.rng.uniform(30, 60)
                continue
            action = self.rng.choice(["kill", "kill", "flush", "pause", "pause"])
            self.log.count(action)
            if action == "kill":
                victim = self.rng.choice([w for w in self.workers if w.alive] or [None])
                if victim is not None:
                    self.log.killed.add(victim.pid)
                    await asyncio.to_thread(victim.kill)
            elif action == "flush":
                self.log.flushes.append(datetime.now(UTC))
                await asyncio.to_thread(self.stack.servers.redis.flushall)
            else:
                await self.pause_for_a_while()

    async def pause_for_a_while(self) -> None:
        target = self.rng.choice([f"/v1/tenants/{t}" for t in TENANTS] + ["/v1/report-types/demo.flaky"])
        async with self.stack.client() as admin:
            with contextlib.suppress(httpx.HTTPError):
                await admin.post(f"{target}/pause")
                await asyncio.sleep(self.rng.uniform(0.5, 2.5))
            for _ in range(20):  # the resume must land, or the drain waits on a paused tenant forever
                with contextlib.suppress(httpx.HTTPError):
                    if (await admin.post(f"{target}/resume")).status_code == 200:
                        return
                await asyncio.sleep(0.5)

    async def restart_mariadb(self) -> None:
        self.log.count("mariadb restart")
        self.db_down.set()
        began = datetime.now(UTC)
        try:
            await asyncio.to_thread(self.stack.servers.db.stop)
            await asyncio.sleep(self.rng.uniform(0.5, 2.0))
            await asyncio.to_thread(self.stack.servers.db.start)
        finally:
            self.db_down.clear()
            # Beats missed while it was away may get an attempt declared lost for a while after.
            margin = timedelta(seconds=STUCK_AFTER_S + 4 * SCAN_INTERVAL_S + 2)
            self.log.outages.append((began - margin, datetime.now(UTC) + margin))

    async def supervisor(self, until: asyncio.Event | None = None) -> None:
        """What a process manager does: a process that ended (a `kill` failpoint) is started again."""
        until = until or self.stop
        while not until.is_set():
            for proc in list(self.stack.procs):
                if proc.returncode is not None and not getattr(proc, "replaced", False):
                    proc.replaced = True  # type: ignore[attr-defined]
                    self.log.killed.add(proc.pid)
                    self.log.count(f"restarted {proc.name.rsplit('-', 1)[0]}")
                    fresh = self.stack.respawn(proc)
                    if proc in self.workers:
                        self.workers[self.workers.index(proc)] = fresh
            await asyncio.sleep(0.2)

    # ---- checks while it runs ------------------------------------------------------------------------

    async def sampler(self) -> None:
        while not self.stop.is_set():
            await asyncio.sleep(0.3)
            if not self.db_down.is_set():
                with contextlib.suppress(AssertionError, RuntimeError, OSError):
                    now = datetime.now(UTC)
                    recent = any((now - flush).total_seconds() < 3 for flush in self.log.flushes)
                    when = now.isoformat() + (" (within 3 s after a Redis flush)" if recent else "")
                    await asyncio.to_thread(checks.check_running_caps, self.stack, CAPS, self.findings, when)

    async def periodic_checks(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stop.wait(), CHECK_EVERY_S)
            if not self.db_down.is_set():
                with contextlib.suppress(AssertionError, RuntimeError, OSError):
                    await asyncio.to_thread(checks.check_attempts_never_overlap, self.stack, self.findings)

    # ---- the end --------------------------------------------------------------------------------------

    async def drain(self) -> None:
        """Faults off: the failpointed workers are replaced by clean ones, and every job gets to finish."""
        self.stack.servers.ensure_running()
        for proc in self.workers:
            proc.replaced = True  # type: ignore[attr-defined]  # its end is ours: no supervisor restarts it
            if proc.alive:
                await asyncio.to_thread(proc.terminate, 30)
        self.workers = [self.stack.start_worker() for _ in range(self.plan.workers)]
        drained = asyncio.Event()
        supervisor = asyncio.create_task(self.supervisor(drained))
        began, left = time.monotonic(), await asyncio.to_thread(self.live_jobs)
        try:
            # Until nothing is left but what waits legitimately, for as long as jobs keep finishing: a
            # backlog is worked off however long it takes (up to DRAIN_MAX_S); stranded jobs stop the drain
            # once nothing has finished for DRAIN_IDLE_S.
            progress_at, live = began, left
            while time.monotonic() - progress_at < DRAIN_IDLE_S and time.monotonic() - began < DRAIN_MAX_S:
                if not await asyncio.to_thread(checks.leftovers, self.stack):
                    return
                await asyncio.sleep(1.0)
                now_live = await asyncio.to_thread(self.live_jobs)
                if now_live < live:
                    progress_at, live = time.monotonic(), now_live
            await self.watch_leftovers()
        finally:
            drained.set()
            await supervisor
            self.findings.notes.append(
                f"drain: {left} live jobs at its start, {await asyncio.to_thread(self.live_jobs)} after "
                f"{time.monotonic() - began:.0f} s"
            )

    async def watch_leftovers(self) -> None:
        """The drain ended with jobs left: each is watched for WATCH_S (dozens of reconciliation ticks). One
        that moves (a new attempt, a new state) is a backlog the drain did not finish in time; one that stays
        as it was, due with nothing in its way, is stranded (check_drained fails the soak for it)."""
        stuck = await asyncio.to_thread(checks.leftovers, self.stack)
        ids = [job_id for listed in stuck.values() for job_id in listed]
        before = await asyncio.to_thread(checks.marks, self.stack, ids)
        waited = time.monotonic()
        while ids and time.monotonic() - waited < WATCH_S:
            await asyncio.sleep(1.0)
            now = await asyncio.to_thread(checks.marks, self.stack, ids)
            self.moving |= {job_id for job_id in ids if now.get(job_id) != before.get(job_id)}
            if self.moving.issuperset(ids):
                return

    def live_jobs(self) -> int:
        live = "status IN ('pending', 'retrying', 'running', 'scheduled')"
        return sum(self.stack.status_counts(live).values())

    def final_checks(self) -> None:
        stack, found = self.stack, self.findings
        checks.check_drained(stack, found, frozenset(self.moving))
        checks.check_attempts_never_overlap(stack, found)
        checks.check_caps_over_history(stack, CAPS, self.log.flushes, found)
        checks.check_ordering(stack, self.log.chains, self.log.continues, found)
        checks.check_lost_attempts(stack, self.log.killed, self.log.outages, found)
        found.notes.append(f"jobs by status: {stack.status_counts()}; faults: {self.log.counts}")


async def _ok(request: Any) -> None:
    resp = await request
    assert resp.status_code == 200, resp.text
