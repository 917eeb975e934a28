"""What the scale phase reads off each measurement: MariaDB's server-wide handler and row counters (SHOW
GLOBAL STATUS deltas, taken with nothing else running), wall time, and what Redis holds.

Rows read is MariaDB's `Rows_read` (every row the server read from a table): 10.11 has no Innodb_rows_read.

A SHOW GLOBAL STATUS itself counts handler reads (its temporary table): calibrate() measures that and every
delta here has it taken off.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.common import pct

ROW_COUNTERS = (
    "Handler_read_first", "Handler_read_key", "Handler_read_last", "Handler_read_next", "Handler_read_prev",
    "Handler_read_rnd", "Handler_read_rnd_next", "Rows_read", "Select_scan", "Sort_rows",
    "Created_tmp_disk_tables", "Questions",
)  # fmt: skip
HANDLER_READS = tuple(c for c in ROW_COUNTERS if c.startswith("Handler_read"))
TIME_BOX_S = 10.0  # a figure's repeats stop once they took this long (at least one is always made)
REQUEST_TIMEOUT_S = 600.0


class Counters:
    """SHOW GLOBAL STATUS deltas of ROW_COUNTERS on a connection of the bench's own engine."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.overhead: dict[str, int] = dict.fromkeys(ROW_COUNTERS, 0)

    async def read(self) -> dict[str, int]:
        from sqlalchemy import text

        names = ", ".join(f"'{n}'" for n in ROW_COUNTERS)
        async with self.db.connect() as conn:
            rows = await conn.execute(text(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({names})"))
            return {str(name): int(value) for name, value in rows}

    async def calibrate(self, rounds: int = 5) -> dict[str, int]:
        """What one read() adds to the counters it reads (the least of `rounds` back-to-back pairs)."""
        deltas = []
        for _ in range(rounds):
            a = await self.read()
            b = await self.read()
            deltas.append({k: b.get(k, 0) - a.get(k, 0) for k in ROW_COUNTERS})
        self.overhead = {k: min(d[k] for d in deltas) for k in ROW_COUNTERS}
        return self.overhead

    def delta(self, before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
        return {k: max(0, after.get(k, 0) - before.get(k, 0) - self.overhead[k]) for k in ROW_COUNTERS}

    async def idle_per_s(self, seconds: float = 2.0) -> dict[str, float]:
        """Background reads with nothing measured running (the API idle): the noise floor, per second."""
        before = await self.read()
        await asyncio.sleep(seconds)
        d = self.delta(before, await self.read())
        return {k: round(v / seconds, 1) for k, v in d.items()}


def rows_figure(delta: dict[str, int], ops: int) -> dict[str, Any]:
    """Per operation: handler reads (all Handler_read_* added), rows read (Rows_read), and the raw deltas."""
    ops = max(1, ops)
    return {
        "handler_reads_per_op": round(sum(delta[k] for k in HANDLER_READS) / ops, 1),
        "rows_read_per_op": round(delta["Rows_read"] / ops, 1),
        "questions_per_op": round(delta["Questions"] / ops, 2),
        "deltas": delta,
        "ops": ops,
    }


async def repeat(
    counters: Counters,
    one: Callable[[], Awaitable[None]],
    max_n: int,
    warm_up: int = 1,
    time_box_s: float = TIME_BOX_S,
) -> dict[str, Any]:
    """`warm_up` calls, then up to `max_n` timed ones (at least one, stopping once `time_box_s` passed);
    latency percentiles and the counters' deltas over the timed calls, per call."""
    for _ in range(warm_up):
        await one()
    before = await counters.read()
    ms: list[float] = []
    began = time.perf_counter()
    while len(ms) < max_n and (not ms or time.perf_counter() - began < time_box_s):
        t0 = time.perf_counter()
        await one()
        ms.append((time.perf_counter() - t0) * 1000)
    delta = counters.delta(before, await counters.read())
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 50), 2),
        "p90_ms": round(pct(ms, 90), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
        "max_ms": round(max(ms), 2),
        **rows_figure(delta, len(ms)),
    }


async def console_login(client: Any, api_key: str) -> None:
    """Sign in to the console as a person would: the login form's CSRF cookie, then the form POST."""
    resp = await client.get("/ui/login")
    resp.raise_for_status()
    token = client.cookies.get("ro_login_csrf")
    if not token:
        raise RuntimeError("the console's login form set no CSRF cookie")
    resp = await client.post("/ui/login", data={"api_key": api_key, "csrf": token, "next": "/ui/"})
    if resp.status_code != 303 or "ro_session" not in client.cookies:
        raise RuntimeError(f"console sign-in failed: {resp.status_code} {resp.text[:300]}")


def checked(resp: Any, what: str) -> Any:
    if resp.status_code != 200:
        raise RuntimeError(f"{what} answered {resp.status_code}: {resp.text[:300]}")
    return resp


async def in_lanes(rds: Any, job_ids: list[str], chunk: int = 20_000) -> int:
    """How many of the jobs have their message waiting in a lane, where a worker's claim can take it (the
    check tests/integration/maintenance/test_reconcile.py makes: job → message → its lane → in that ZSET)."""
    from app.dispatch.lanes import PREFIX

    found = 0
    for start in range(0, len(job_ids), chunk):
        ids = job_ids[start : start + chunk]
        async with rds.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hget(PREFIX + "msg", job_id)
            held = await pipe.execute()
        async with rds.pipeline(transaction=False) as pipe:
            for arq_id in held:
                pipe.hget(PREFIX + "meta", arq_id or b"-")
            lanes = await pipe.execute()
        async with rds.pipeline(transaction=False) as pipe:
            for arq_id, lane in zip(held, lanes, strict=True):
                pipe.zscore(PREFIX.encode() + b"lane:" + (lane or b"-"), arq_id or b"-")
            scores = await pipe.execute()
        found += sum(1 for s in scores if s is not None)
    return found


async def messages_held(rds: Any) -> int:
    """Jobs that have a message in Redis (queued, in a lane or in progress): HLEN of the dispatch's `msg`."""
    from app.dispatch.lanes import PREFIX

    return int(await rds.hlen(PREFIX + "msg"))
