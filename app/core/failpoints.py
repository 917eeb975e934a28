"""Named failpoints: places between two statements where a test can make something go wrong on purpose
(an outage, a deadlock, a crash, a pause). Inert unless armed: `await hit(name)` is one dict lookup.

Armed in-process by a test (`arm(name, action)`, `armed(...)`), or in a real process by the environment:
`RO_FAILPOINTS="group_start.before_commit=outage@0.2;submit.after_commit=kill@0.01"` (action, then an
optional probability). Actions: `outage` (a connection error the code treats as the database being gone),
`deadlock` (MySQL error 1213), `kill` (the process ends at once, as with SIGKILL), `sleep:MS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from collections.abc import Awaitable, Callable, Iterator

Action = Callable[[], Awaitable[None]]

# Every point the code passes through, so a test or the soak can only arm one that exists.
POINTS = frozenset(
    {
        "group_start.before_commit",  # a start batch's rows are written, its transaction not yet committed
        "group_start.after_commit",  # a start batch committed, its callers not yet answered
        "group_success.before_commit",  # a success batch's rows are written, not yet committed
        "submit.after_commit",  # a new job committed, its message not yet enqueued
        "claim.after_claim",  # a message claimed in Redis, its start not yet tried in MySQL
        "finish.before_record",  # a report ran, its outcome not yet recorded
        "schedule.before_fire_commit",  # a schedule's fire written, not yet committed
        "reconcile.between_pages",  # reconciliation enqueued one page, the next not yet read
    }
)

_armed: dict[str, Action] = {}


class FailpointOutage(ConnectionError):
    """Raised by an `outage` failpoint: looks like a lost database connection (`is_db_outage`)."""


class FailpointDeadlock(Exception):
    """Raised by a `deadlock` failpoint: carries MySQL's deadlock code as its first argument, as the
    driver's error does (`is_lock_conflict` reads `.orig.args`)."""

    def __init__(self, point: str) -> None:
        super().__init__(1213, f"Deadlock found when trying to get lock (failpoint {point})")


async def hit(name: str) -> None:
    """Run the action armed at `name`, if any."""
    if _armed:
        action = _armed.get(name)
        if action is not None:
            await action()


def arm(name: str, action: Action) -> None:
    if name not in POINTS:
        raise KeyError(f"no failpoint {name!r}; known: {sorted(POINTS)}")
    _armed[name] = action


def disarm(name: str | None = None) -> None:
    if name is None:
        _armed.clear()
    else:
        _armed.pop(name, None)


@contextlib.contextmanager
def armed(name: str, action: Action) -> Iterator[None]:
    arm(name, action)
    try:
        yield
    finally:
        disarm(name)


def raising(exc: BaseException | Callable[[], BaseException], times: int | None = None) -> Action:
    """An action raising `exc` (or a fresh one from a factory) the first `times` hits (every hit: None)."""
    left = [times]

    async def action() -> None:
        if left[0] is not None:
            if left[0] <= 0:
                return
            left[0] -= 1
        raise exc() if callable(exc) and not isinstance(exc, BaseException) else exc

    return action


def waiting(entered: asyncio.Event, proceed: asyncio.Event) -> Action:
    """An action that signals `entered` and waits for `proceed`: the test runs its own step in between."""

    async def action() -> None:
        entered.set()
        await proceed.wait()

    return action


def _from_spec(point: str, spec: str, rng: random.Random) -> Action:
    kind, _, chance = spec.partition("@")
    probability = float(chance) if chance else 1.0
    name, _, arg = kind.partition(":")

    async def act() -> None:
        if rng.random() >= probability:
            return
        if name == "outage":
            raise FailpointOutage(f"failpoint {point}")
        if name == "deadlock":
            raise _deadlock_error(point)
        if name == "kill":
            os._exit(137)
        if name == "sleep":
            await asyncio.sleep(float(arg or "100") / 1000)
            return
        raise ValueError(f"unknown failpoint action {kind!r}")

    return act


def _deadlock_error(point: str) -> BaseException:
    """MySQL's deadlock as SQLAlchemy raises it (an OperationalError whose driver error has code 1213)."""
    from sqlalchemy.exc import OperationalError

    return OperationalError(f"failpoint {point}", None, FailpointDeadlock(point))


def deadlock(point: str) -> BaseException:
    """A deadlock error as the database driver raises it, for tests arming a point with `raising`."""
    return _deadlock_error(point)


def arm_from_environment(environ: dict[str, str] | None = None) -> None:
    """Arm what `RO_FAILPOINTS` names (the soak sets it on the processes it starts); seeded by
    `RO_FAILPOINTS_SEED` so a run can be repeated."""
    env = os.environ if environ is None else environ
    text = env.get("RO_FAILPOINTS", "").strip()
    if not text:
        return
    rng = random.Random(env.get("RO_FAILPOINTS_SEED", "0") + str(os.getpid()))
    for part in filter(None, (piece.strip() for piece in text.split(";"))):
        point, _, spec = part.partition("=")
        arm(point.strip(), _from_spec(point.strip(), spec.strip(), rng))
