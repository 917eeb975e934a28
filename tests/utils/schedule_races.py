"""Interleaving the schedules API with a fire: the API host's clock, a PATCH stopped between its read and its
write (at the callback check), a fire blind to a record, waiting until a step blocks on a row (MariaDB).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime

import pytest
from sqlalchemy import text

from app.core import failpoints
from app.core.db import session_scope
from app.schedules.run_repository import RunRepository


def api_clock(monkeypatch: pytest.MonkeyPatch, at: datetime) -> None:
    """The schedules service (create, PATCH, resume) reads `at` as now: an API host whose clock says so."""
    monkeypatch.setattr("app.schedules.service.utcnow", lambda: at)


def trigger_clock(monkeypatch: pytest.MonkeyPatch, at: datetime) -> None:
    """A manual trigger reads `at` as now (its run's fire_time)."""
    monkeypatch.setattr("app.schedules.firing.utcnow", lambda: at)


def blind_first_look_at_recorded_fires(monkeypatch: pytest.MonkeyPatch) -> list[set[datetime]]:
    """The fire path's first look at the fires recorded sees none (as if another writer recorded one after
    it looked, without the schedule's lock); later looks see them. Returns what each look saw."""
    real = RunRepository.recorded_fires
    looks: list[set[datetime]] = []

    async def recorded_fires(
        self: RunRepository, schedule_id: str, first: datetime, last: datetime
    ) -> set[datetime]:
        seen = await real(self, schedule_id, first, last) if looks else set()
        looks.append(seen)
        return seen

    monkeypatch.setattr(RunRepository, "recorded_fires", recorded_fires)
    return looks


@dataclass
class Gate:
    """Set `entered` when the stopped step got there; it goes on once `proceed` is set."""

    entered: asyncio.Event = field(default_factory=asyncio.Event)
    proceed: asyncio.Event = field(default_factory=asyncio.Event)


def stop_patch_at_callback_check(monkeypatch: pytest.MonkeyPatch) -> Gate:
    """The first callback check of the schedules service waits at the gate (any URL then passes): a PATCH
    sending `callback_url` has read the schedule there and not yet written it. Later checks pass at once."""
    gate = Gate()
    action = failpoints.waiting(gate.entered, gate.proceed)

    async def check(tenant: str, url: str) -> str | None:
        if not gate.entered.is_set():
            await action()
        return None

    monkeypatch.setattr("app.schedules.service.check_callback_url", check)
    return gate


async def until_a_statement_waits_on(table: str, timeout_s: float = 10.0) -> None:
    """Returns once another connection's statement on `table` is running and has not finished (MariaDB's
    PROCESSLIST): with the test's other step stopped holding that table's row, the step the test let go
    waits for its lock (a statement that did not wait would be over before it is seen)."""
    deadline = time.monotonic() + timeout_s
    query = text(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST"
        " WHERE command = 'Query' AND id <> CONNECTION_ID() AND info LIKE :table"
    )
    while time.monotonic() < deadline:
        async with session_scope() as session:
            if (await session.execute(query, {"table": f"%{table}%"})).scalar_one():
                return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no statement on {table} waited within {timeout_s} s")
