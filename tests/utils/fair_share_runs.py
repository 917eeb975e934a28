"""Fair-share checks read from the truth: attempt start and finish times in MySQL (who started when, how
many ran at once) and the slots Redis says are held (none may be left once everything ended).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tests.utils.jobs import parse_ts
from tests.utils.stack import Stack


@dataclass(frozen=True)
class Start:
    job_id: str
    tenant: str
    report_type: str
    priority: int
    started_at: datetime
    finished_at: datetime | None


def starts(stack: Stack, where: str = "1=1") -> list[Start]:
    """Every attempt that started (superseded hand-backs included), in start order."""
    rows = stack.sql(
        "SELECT j.id, j.tenant, j.report_type, j.priority, a.started_at, a.finished_at "
        "FROM job_attempts a JOIN report_jobs j ON j.id = a.job_id "
        f"WHERE {where} ORDER BY a.started_at, a.id"
    )
    return [
        Start(r[0], r[1], r[2], int(r[3]), _ts(r[4]), None if r[5] in ("NULL", "") else _ts(r[5]))
        for r in rows
    ]


def most_at_once(runs: list[Start]) -> int:
    """The most attempts running at the same moment (a finish at t frees its slot before a start at t)."""
    events = []
    for run in runs:
        assert run.finished_at is not None, f"{run.job_id} still running"
        events += [(run.started_at, 1), (run.finished_at, -1)]
    peak = current = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):
        current += delta
        peak = max(peak, current)
    return peak


def slots_held(stack: Stack) -> dict[str, dict[str, str]]:
    """What Redis holds as running: by type, by tenant, and the claims themselves."""
    client = stack.redis_client()
    try:
        return {
            name: {k.decode(): v.decode() for k, v in client.hgetall(f"ro:d:{name}").items()}
            for name in ("run:type", "run:tenant", "claims")
        }
    finally:
        client.close()


def no_slot_held(stack: Stack) -> bool:
    return not any(slots_held(stack).values())


def _ts(value: str) -> datetime:
    return parse_ts(value.replace(" ", "T") + ("" if "+" in value else "+00:00"))
