"""The dispatch state in Redis: every queued report message also sits in a lane (priority, tenant, report
type); workers claim from the lanes by priority, then weighted fair share, under concurrency caps and pauses.

arq's own keys stay as they are (the message, its in-progress key, the queue ZSET): a lane only decides
*which* due message a free slot takes. The state is derived from MySQL and rebuilt from it after a flush.
Keys (all under `ro:d:`):
- `lane:{p}\\t{tenant}\\t{type}` ZSET arq id → due ms; `meta` HASH arq id → its lane;
- `prios` ZSET of priorities with waiting lanes; `tenants:{p}` ZSET tenant → pass (virtual time: a
  start adds 1/weight, a tenant joining starts at the lowest pass waiting, a tenant with nothing it may
  start now is lifted to the pass of the one that starts); `types:{p}\\t{tenant}` SET;
- `msg` HASH job id → its one message (queued, in a lane or in progress: an enqueue of a job that has one
  adds none); `again` SET of jobs whose running message runs once more if it ends without running again;
- `claims` HASH job id → "arq id\\ttenant\\ttype" (a slot held; arq id `*` after a rebuild, taken over by
  the job's next claimed message), `claimed_at` ZSET job id → ms, `run:type` / `run:tenant` HASH → slots
  held; a message is only ever handed out holding its job's slot (a second message of a job is dropped);
- the fence: `attempt` HASH job id → the attempt (`attempt_code`) holding its slot, `over:{job}` the highest
  attempt the stuck scan declared over (a day): a late start of an older attempt never takes the slot;
- policy: `cap:type`, `cap:tenant`, `weight` HASHes, `cap:tenant_default`, `paused` SET of
  "type\\tNAME" / "tenant\\tNAME"; `ready` is set once the state was rebuilt from MySQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from arq.constants import (
    abort_jobs_ss,
    in_progress_key_prefix,
    job_key_prefix,
    result_key_prefix,
    retry_key_prefix,
)
from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from app.core.redis_pool import companion
from app.dispatch.scripts import (
    CLAIM_LUA,
    ENQUEUE_LUA,
    EXPLAIN_LUA,
    FINISH_LUA,
    HOLD_LUA,
    POLICY_LUA,
    REBUILD_LUA,
    RELEASE_LUA,
)

PREFIX = "ro:d:"
READY_KEY = PREFIX + "ready"
DEFAULT_PRIORITY = 5
MIN_PRIORITY, MAX_PRIORITY = 0, 9


@dataclass(frozen=True)
class Lane:
    """Where a message waits: its job's priority, tenant and report type."""

    priority: int = DEFAULT_PRIORITY
    tenant: str = ""
    report_type: str = ""

    def encoded(self) -> str:
        return f"{self.priority}\t{self.tenant}\t{self.report_type}"


@dataclass(frozen=True)
class Policy:
    """What the claim obeys, as MySQL, the settings and the report types declare it (see app.fairshare)."""

    type_caps: dict[str, int] = field(default_factory=dict)
    tenant_caps: dict[str, int] = field(default_factory=dict)
    tenant_cap_default: int = 0  # 0: no cap
    weights: dict[str, int] = field(default_factory=dict)
    paused_types: frozenset[str] = frozenset()
    paused_tenants: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Running:
    """A job MySQL says is running, for the rebuild: it holds a slot of its type and tenant."""

    job_id: str
    tenant: str
    report_type: str
    attempt: int = 0  # `attempt_code` of its running attempt (0: not known; any start may take the slot over)


def attempt_code(replay: int, attempt: int) -> int:
    """An attempt as one number growing with every attempt of a job, replays included (the slot's fence)."""
    return replay * 1_000_000 + attempt


# The arq key prefixes the scripts spell out must be arq's own.
assert (job_key_prefix, in_progress_key_prefix, retry_key_prefix, result_key_prefix, abort_jobs_ss) == (
    "arq:job:",
    "arq:in-progress:",
    "arq:retry:",
    "arq:result:",
    "arq:abort",
)


class Scripts:
    """The dispatch scripts registered on one Redis pool."""

    def __init__(self, redis: Redis) -> None:
        self.enqueue: AsyncScript = redis.register_script(ENQUEUE_LUA)
        self.claim: AsyncScript = redis.register_script(CLAIM_LUA)
        self.hold: AsyncScript = redis.register_script(HOLD_LUA)
        self.finish: AsyncScript = redis.register_script(FINISH_LUA)
        self.release: AsyncScript = redis.register_script(RELEASE_LUA)
        self.policy: AsyncScript = redis.register_script(POLICY_LUA)
        self.rebuild: AsyncScript = redis.register_script(REBUILD_LUA)
        self.explain: AsyncScript = redis.register_script(EXPLAIN_LUA)


@dataclass(frozen=True)
class Wait:
    """Why a job would not start now although it is next in line: a pause, or a cap that is full."""

    reason: str  # "paused" | "cap"
    kind: str  # "tenant" | "report_type"
    name: str
    limit: int | None = None

    @classmethod
    def parse(cls, raw: bytes | str) -> Wait | None:
        text = raw.decode() if isinstance(raw, bytes) else raw
        if not text:
            return None
        parts = text.split("\t")
        return cls(parts[0], parts[1], parts[2], int(parts[3]) if len(parts) > 3 else None)

    def document(self) -> dict[str, str | int]:
        """As the API shows it: {"paused": "report_type:NAME"} or {"cap": "tenant:NAME", "limit": 2}."""
        out: dict[str, str | int] = {self.reason: f"{self.kind}:{self.name}"}
        if self.limit is not None:
            out["limit"] = self.limit
        return out


def policy_args(policy: Policy) -> list[str | int]:
    args: list[str | int] = []
    for name, cap in sorted(policy.type_caps.items()):
        args += ["ct", name, cap]
    for name, cap in sorted(policy.tenant_caps.items()):
        args += ["cn", name, cap]
    if policy.tenant_cap_default > 0:
        args += ["cd", "", policy.tenant_cap_default]
    for name, weight in sorted(policy.weights.items()):
        args += ["w", name, weight]
    for name in sorted(policy.paused_types):
        args += ["p", f"type\t{name}", 1]
    for name in sorted(policy.paused_tenants):
        args += ["p", f"tenant\t{name}", 1]
    return args


def rebuild_args(wake_channel: str, running: Sequence[Running], policy: Policy) -> list[Any]:
    args: list[Any] = [wake_channel, len(running)]
    for job in running:
        args += [job.job_id, job.tenant, job.report_type, job.attempt]
    return args + policy_args(policy)


async def running_counts(redis: Redis) -> tuple[dict[str, int], dict[str, int]]:
    """Slots held now, by report type and by tenant."""
    async with redis.pipeline(transaction=False) as pipe:
        pipe.hgetall(PREFIX + "run:type")
        pipe.hgetall(PREFIX + "run:tenant")
        by_type, by_tenant = await pipe.execute()
    return _counts(by_type), _counts(by_tenant)


async def claims(redis: Redis) -> dict[str, tuple[str, float]]:
    """Slots held: job id → (the message holding it, claimed at in ms; 0 after a rebuild)."""
    async with redis.pipeline(transaction=False) as pipe:
        pipe.hgetall(PREFIX + "claims")
        pipe.zrange(PREFIX + "claimed_at", 0, -1, withscores=True)
        held, since = await pipe.execute()
    at = {_text(job_id): float(ms) for job_id, ms in since}
    return {
        _text(job_id): (_text(value).split("\t")[0], at.get(_text(job_id), 0.0))
        for job_id, value in held.items()
    }


def _counts(raw: dict[Any, Any]) -> dict[str, int]:
    return {_text(name): int(value) for name, value in raw.items() if int(value) > 0}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def registered_scripts() -> Scripts:
    """The dispatch scripts registered on the process's pool (they go with it)."""
    return await companion("dispatch-scripts", Scripts)
