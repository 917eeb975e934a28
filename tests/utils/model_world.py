"""The dispatch model's workers: in-process OrchestratorWorkers that claim through the real claim script and
run each claimed message through app/dispatch/running.py, parked at two gates where the model decides.

A delivery parks before its start (arq's `on_job_start` hook) and inside the report (the model's report
types); between the gates it is the real code: group-committed start, outcome, arq finish, slots, lanes.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from app.attempts import service
from app.core import redis_pool
from app.core.states import AttemptKey
from app.dispatch import running
from app.reports.base import PermanentError, ReportContext
from app.reports.registry import registry
from tests.utils.workers import build_worker

PLAIN, CAPPED = "model.plain", "model.capped"
TYPES = (PLAIN, CAPPED)
DECLARED_CAP = 2  # model.capped's own max_concurrency, until a set_type overrides it
TENANTS = ("a", "b")
WORKER_SLOTS = 4
SETTLE_S = 20.0  # a delivery that has not reached a gate by then is a hang (unless a process died)
DEATH_SETTLE_S = 0.3  # after a failpoint ended a process: how long its other callers get to move on

# The states of one delivery (one claimed message, as one worker runs it).
PARKED, STARTING, RUNNING, FINISHING, ENDED = "parked", "starting", "running", "finishing", "ended"
SUCCESS, RETRY, PERMANENT = "success", "retry", "permanent"


class WorkerDeath(BaseException):
    """A process ending at a failpoint: no handler of the app catches it, so the calls it carried stop."""


class ModelParams(BaseModel):
    n: int = 0


_delivery: contextvars.ContextVar[Delivery | None] = contextvars.ContextVar("model_delivery", default=None)


@dataclass(eq=False)
class Delivery:
    """One claimed message in one model worker, from the claim to arq's finish."""

    arq_id: str
    worker: ModelWorker
    claimed_step: int
    flush_epoch: int
    policy_epoch: int
    state: str = STARTING
    parked: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    outcome: asyncio.Future[str] | None = None
    attempt: int = 0
    replay: int = 0
    dead: bool = False
    task: asyncio.Task[None] | None = None

    @property
    def job_id(self) -> str:
        return self.arq_id.split(":")[0]

    @property
    def live(self) -> bool:
        return not self.dead and self.state != ENDED

    def key(self) -> AttemptKey:
        return AttemptKey(self.job_id, self.attempt, self.replay)

    def settled(self) -> bool:
        if self.state == STARTING:
            return self.parked.is_set() and not self.gate.is_set()
        return self.state in (RUNNING, ENDED)

    def __repr__(self) -> str:
        return f"<{self.arq_id} on {self.worker.name}: {self.state}{' dead' if self.dead else ''}>"


class ModelWorker:
    """One worker process of the model: a real OrchestratorWorker whose loop the model drives by hand."""

    def __init__(self, world: Workers, name: str, worker: Any) -> None:
        self.world = world
        self.name = name
        self.worker = worker
        self.alive = True
        self.deliveries: list[Delivery] = []

    def free_slots(self) -> int:
        return WORKER_SLOTS - sum(1 for d in self.deliveries if d.state != ENDED)

    async def hold_start(self, _ctx: dict[str, Any]) -> None:
        """arq's on_job_start: park until the model lets this delivery start."""
        delivery = _delivery.get()
        assert delivery is not None
        delivery.parked.set()
        await delivery.gate.wait()


async def model_report(ctx: ReportContext, params: ModelParams) -> None:
    """The model's report: tells the model it runs, then does what the model decides."""
    delivery = _delivery.get()
    assert delivery is not None, "a model report ran outside the model"
    verdict = await delivery.worker.world.entered(delivery, ctx)
    if verdict == RETRY:
        raise RuntimeError("model: a retryable failure")
    if verdict == PERMANENT:
        raise PermanentError("model: a permanent failure")


def register_types() -> None:
    registry.report_type(PLAIN, params=ModelParams, timeout_s=3600)(model_report)
    registry.report_type(CAPPED, params=ModelParams, timeout_s=3600, max_concurrency=DECLARED_CAP)(
        model_report
    )


def unregister_types() -> None:
    for name in TYPES:
        registry._types.pop(name, None)


class Workers:
    """The model's workers and their deliveries; what entered a report when; which processes died."""

    def __init__(self) -> None:
        self.workers: list[ModelWorker] = []
        self.deliveries: list[Delivery] = []
        self.step = 0
        self.flush_epoch = 0
        self.policy_epoch = 0
        self.deaths = 0  # failpoint deaths fired so far
        self.entered_now: list[Delivery] = []  # deliveries that reached the report in the current step
        self.ran: set[str] = set()  # jobs some delivery ran the report of
        self.orphaned: set[str] = set()  # jobs a dead process was carrying
        self.crashes: list[str] = []  # unexpected errors out of a delivery (the worker would have crashed)
        self._doomed: list[ModelWorker] = []  # processes a failpoint ended, not yet replaced
        self._names = 0

    # ---- workers --------------------------------------------------------------------------------------

    async def add_worker(self) -> ModelWorker:
        self._names += 1
        name = f"model:{self._names}"
        pool = await redis_pool.get_pool()
        worker = build_worker(redis_pool=pool, ctx={"worker_name": name, "redis": pool}, max_jobs=100)
        model_worker = ModelWorker(self, name, worker)
        worker.on_job_start = model_worker.hold_start
        self.workers.append(model_worker)
        return model_worker

    def live_workers(self) -> list[ModelWorker]:
        return [w for w in self.workers if w.alive]

    async def kill(self, worker: ModelWorker) -> None:
        """The process ends: what it carried stays where it was (claims, in-progress keys, running rows)."""
        worker.alive = False
        for delivery in worker.deliveries:
            if delivery.state != ENDED:
                delivery.dead = True
                self.orphaned.add(delivery.job_id)
        await self.add_worker()

    # ---- deliveries -----------------------------------------------------------------------------------

    async def claim(self, worker: ModelWorker, slots: int) -> list[Delivery]:
        """The worker's real claim (rebuilding the dispatch state after a flush); each message parks."""
        claimed = await worker.worker.claim(slots)
        fresh = []
        for message in claimed.jobs:
            delivery = Delivery(message.job_id, worker, self.step, self.flush_epoch, self.policy_epoch)
            delivery.task = asyncio.get_running_loop().create_task(self._deliver(delivery, message))
            worker.deliveries.append(delivery)
            self.deliveries.append(delivery)
            fresh.append(delivery)
        await self.settle(fresh)
        return fresh

    async def _deliver(self, delivery: Delivery, message: running.Claimed) -> None:
        _delivery.set(delivery)
        try:
            await running.run_claimed(delivery.worker.worker, message)
        except WorkerDeath:
            delivery.dead = True
            self.orphaned.add(delivery.job_id)
            self._doomed.append(delivery.worker)
            return
        except Exception as exc:  # arq would raise it in the worker's main loop: the process ends
            self.crashes.append(f"{delivery!r}: {type(exc).__name__}: {exc}")
        delivery.state = ENDED

    async def start(self, deliveries: Iterable[Delivery]) -> None:
        """Let parked deliveries start, all in the same instant (so their starts share a group commit)."""
        chosen = [d for d in deliveries if d.live and d.state == STARTING and not d.gate.is_set()]
        for delivery in chosen:
            delivery.gate.set()
        await self.settle(chosen)

    async def entered(self, delivery: Delivery, ctx: ReportContext) -> str:
        delivery.state = RUNNING
        delivery.attempt, delivery.replay = ctx.attempt, ctx.replay
        delivery.outcome = asyncio.get_running_loop().create_future()
        self.entered_now.append(delivery)
        self.ran.add(delivery.job_id)
        return await delivery.outcome

    async def finish(self, delivery: Delivery, verdict: str) -> None:
        assert delivery.outcome is not None and delivery.live and delivery.state == RUNNING
        delivery.state = FINISHING
        delivery.outcome.set_result(verdict)
        await self.settle([delivery])

    async def heartbeat(self) -> list[str]:
        """Every live runner beats, as its heartbeat loop would; returns those told the attempt is over."""
        taken = []
        for delivery in self.runners():
            mine, _ = await service.heartbeat(delivery.key(), None)
            if not mine:
                taken.append(f"{delivery!r} attempt {delivery.attempt}")
        return taken

    def runners(self) -> list[Delivery]:
        return [d for d in self.deliveries if d.live and d.state == RUNNING]

    def parked(self) -> list[Delivery]:
        return [d for d in self.deliveries if d.live and d.state == STARTING and not d.gate.is_set()]

    async def settle(self, deliveries: list[Delivery]) -> None:
        """Wait until each delivery is parked, in a report, or ended. Those a failpoint's death left hanging
        are the dead process's: marked dead with everything else that process carried."""
        deaths_before = self.deaths
        deadline = time.monotonic() + SETTLE_S
        while True:
            waiting = [d for d in deliveries if not d.dead and not d.settled()]
            if not waiting:
                break
            if self.deaths > deaths_before:
                await asyncio.sleep(DEATH_SETTLE_S)
                for delivery in [d for d in deliveries if not d.dead and not d.settled()]:
                    self._doomed.append(delivery.worker)
                    delivery.dead = True
                    self.orphaned.add(delivery.job_id)
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"deliveries hang (no gate reached in {SETTLE_S:g} s): {waiting}")
            await asyncio.sleep(0.002)
        await self.bury()

    async def bury(self) -> None:
        """Processes a failpoint ended are dead: replaced, and all they carried orphaned."""
        doomed, self._doomed = self._doomed, []
        for worker in doomed:
            if worker.alive:
                await self.kill(worker)

    async def close(self) -> None:
        tasks = [d.task for d in self.deliveries if d.task is not None and not d.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)
