"""Scale phase (issue 28): the same figures at each table size (the empty table, 1M and 10M finished jobs,
BENCH_SCALE_SIZES), every size carrying the same pending backlog of a paused tenant; rows read beside each.

Fills are bulk SQL (bench/scale_fill.py); the figures and their rows read come from bench/scale_steps.py;
bench/report_scale.py prints each figure at each size with its ratio to the first size.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from datetime import UTC, datetime
from typing import Any

from bench.common import (
    SCALE_BACKLOG,
    SCALE_BUFFER_POOL_MB,
    SCALE_DRAIN_JOBS,
    SCALE_DROP_INDEXES,
    SCALE_EXPLAIN,
    SCALE_FILL_BUDGET_S,
    SCALE_PURGE_ROWS,
    SCALE_REDO_LOG_MB,
    log,
    scale_sizes,
)
from bench.context import ApiServer, Bench
from bench.scale_explain import explain, explain_all, explain_lines
from bench.scale_fill import (
    FILL_CHUNK,
    PAUSED_TENANT,
    Layout,
    fill_backlog,
    fill_expired,
    fill_finished,
    layout,
    table_sizes,
)
from bench.scale_probe import Counters
from bench.scale_steps import READ_FIGURES, drain, prime, purge, reads, recovery, submits, ticks

EXPLAIN_PURGE_ROWS = 2_000  # the explained purge call's own expired slice
EXPLAIN_SLICES_AFTER = 100  # its numbers: far past the measured slices'


async def size_server(bench: Bench) -> dict[str, Any]:
    """The buffer pool (and redo log) this phase runs with, resized online; what MariaDB reports after."""
    from sqlalchemy import text

    async with bench.db.connect() as conn:
        await conn.execute(text(f"SET GLOBAL innodb_buffer_pool_size = {SCALE_BUFFER_POOL_MB * 2**20}"))
        await conn.execute(text(f"SET GLOBAL innodb_log_file_size = {SCALE_REDO_LOG_MB * 2**20}"))
        for _ in range(600):
            status = (await conn.execute(text("SHOW STATUS LIKE 'Innodb_buffer_pool_resize_status'"))).all()
            if not status or not status[0][1] or "complete" in str(status[0][1]).lower():
                break
            await asyncio.sleep(0.1)
        names = "'innodb_buffer_pool_size', 'innodb_log_file_size', 'innodb_flush_log_at_trx_commit'"
        rows = await conn.execute(text(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})"))
        return {str(k): str(v) for k, v in rows}


async def fill_to(bench: Bench, lay: Layout, have: int, want: int) -> dict[str, Any]:
    """Finished jobs have+1 … want in one fill; cut at whole chunks when SCALE_FILL_BUDGET_S would be
    exceeded (estimated from a first chunk's pace), and said so."""
    async with bench.db.connect() as conn:
        if want - have > 2 * FILL_CHUNK:
            probe = await fill_finished(conn, lay, have + 1, have + FILL_CHUNK, drop_keys=False)
            per_row = probe["insert_s"] / FILL_CHUNK
            done = have + FILL_CHUNK
            affordable = int(SCALE_FILL_BUDGET_S / max(per_row * 1.3, 1e-6))  # 1.3: the index build after
            target = min(want, done + max(0, affordable) // FILL_CHUNK * FILL_CHUNK)
            rest = await fill_finished(conn, lay, done + 1, target, drop_keys=SCALE_DROP_INDEXES)
            fig = {
                **rest,
                "rows": target - have,
                "seconds": round(probe["seconds"] + rest["seconds"], 1),
                "first_chunk_s": probe["seconds"],
            }
            fig["rows_per_s"] = round(fig["rows"] / fig["seconds"]) if fig["seconds"] else None
        else:
            fig = await fill_finished(conn, lay, have + 1, want, drop_keys=SCALE_DROP_INDEXES)
            target = want
        fig["tables"] = await table_sizes(conn)
    fig["reached"], fig["wanted"], fig["cut_short"] = target, want, target < want
    return fig


async def explain_purge(found: dict[str, Any]) -> int:
    """One purge_expired_jobs() call with an expired slice of its own in place, its statements replayed under
    ANALYZE (rolled back); how many jobs it deleted."""
    from app.maintenance.service import purge_expired_jobs

    got: list[int] = []

    async def one() -> None:
        got.append(await purge_expired_jobs())

    found["purge"] = await explain(one)
    return sum(got)


async def measure(
    bench: Bench, api: ApiServer, counters: Counters, lay: Layout, index: int, ids: list[str]
) -> dict[str, Any]:
    """Every figure at the current size, in an order that leaves the next size the same state: submits (the
    drain's jobs) and the drain first, so that even the empty table's list pages show a full page of the big
    tenant's jobs; then reads and ticks on a quiet system, the purge of a fresh expired slice, and last the
    FLUSHALL recovery (the backlog ends back in its lanes)."""
    out: dict[str, Any] = {"idle_per_s": await counters.idle_per_s()}
    sub = await submits(bench, api, counters, SCALE_DRAIN_JOBS)
    out["submit_single"], out["submit_bulk"] = sub["single"], sub["bulk"]
    log(f"  single submit p50 {sub['single']['p50_ms']:.1f} ms; bulk {sub['bulk']['jobs_per_s']:,.0f} jobs/s")
    out["drain"] = await drain(bench, counters, sub["first_id"])
    log(f"  drain {out['drain']['jobs_per_s']:,.0f} jobs/s ({out['drain']['jobs']:,} jobs)")
    out.update(await reads(bench, api, counters))
    figs = [(k, v) for k, v in out.items() if k in READ_FIGURES]
    log(
        "  reads p50: "
        + ", ".join(f"{k} {v['p50_ms']:.1f} ms ({v['handler_reads_per_op']:,.0f} rows)" for k, v in figs)
    )
    out["tick"] = await ticks(counters, explain=SCALE_EXPLAIN and index > 0)
    log(f"  tick {out['tick']['p50_ms']:.0f} ms ({out['tick']['handler_reads_per_op']:,.0f} rows)")
    if SCALE_EXPLAIN and index:
        out["explain"] = {**await explain_all(), "tick": out["tick"].pop("explain")}
        for line in explain_lines(out["explain"], 10_000):
            log("  " + line)
    first = 1 + index * SCALE_PURGE_ROWS
    async with bench.db.connect() as conn:
        out["purge_fill_s"] = round(await fill_expired(conn, lay, first, first + SCALE_PURGE_ROWS - 1), 1)
    out["purge"] = await purge(bench, counters, SCALE_PURGE_ROWS)
    log(f"  purge {out['purge']['jobs_per_s'] or 0:,.0f} jobs/s ({out['purge']['purged']:,} of "
        f"{SCALE_PURGE_ROWS:,}; {out['purge']['jobs_per_call']:.0f} a call)")  # fmt: skip
    if SCALE_EXPLAIN and index:
        # Its own slice, after the measured purge: one call takes a whole slice, and the explained call's
        # deletions must not be missing from the figure.
        again = 1 + (index + EXPLAIN_SLICES_AFTER) * SCALE_PURGE_ROWS
        async with bench.db.connect() as conn:
            await fill_expired(conn, lay, again, again + EXPLAIN_PURGE_ROWS - 1)
        await explain_purge(out.setdefault("explain", {}))
    out["recovery"] = await recovery(bench, counters, ids)
    rec = out["recovery"]
    log(f"  recovery after FLUSHALL: {rec['in_lanes_after_each_tick'][-1]:,} of {rec['backlog']:,} in lanes "
        f"after {rec['ticks']} tick(s), {rec['seconds']:.1f} s")  # fmt: skip
    return out


async def run(bench: Bench) -> None:
    from sqlalchemy import text

    from app.core.config import get_settings
    from app.fairshare import service as fairshare

    sizes = scale_sizes()
    began = time.perf_counter()
    res: dict[str, Any] = {
        "sizes_wanted": sizes, "backlog": SCALE_BACKLOG, "drain_jobs": SCALE_DRAIN_JOBS,
        "purge_rows": SCALE_PURGE_ROWS, "server": await size_server(bench),
        "disk_free_gb_before": round(shutil.disk_usage(bench.work).free / 2**30, 1),
    }  # fmt: skip
    bench.results["scale_phase"] = res
    log(f"scale: sizes {', '.join(f'{s:,}' for s in sizes)} finished jobs, a {SCALE_BACKLOG:,}-job backlog "
        f"of a paused tenant at each; MariaDB {res['server']}")  # fmt: skip
    await bench.clean()
    await fairshare.set_tenant(PAUSED_TENANT, {"paused": True})
    lay = layout(datetime.now(UTC).replace(tzinfo=None), max(sizes), get_settings().job_retention_s)
    async with bench.db.connect() as conn:
        res["backlog_fill_s"] = round(await fill_backlog(conn, lay, SCALE_BACKLOG), 1)
        ids = [str(r[0]) for r in await conn.execute(
            text("SELECT id FROM report_jobs WHERE tenant = :t AND status = 'pending' ORDER BY id"),
            {"t": PAUSED_TENANT},
        )]  # fmt: skip
    res["prime"] = await prime(bench, ids)
    api = await bench.launch_api("api-scale", workers=1, METRICS_ENABLED="true", METRICS_CACHE_S="0")
    res["api"] = {"workers": 1, "METRICS_CACHE_S": "0", "command": api.command}
    counters = Counters(bench.db)
    res["status_overhead"] = await counters.calibrate()
    res["sizes"] = []
    have = 0
    try:
        for index, size in enumerate(sizes):
            entry: dict[str, Any] = {"size": size}
            if size > have:
                log(f"scale: filling finished jobs {have + 1:,} … {size:,}")
                entry["fill"] = await fill_to(bench, lay, have, size)
                have = entry["fill"]["reached"]
                f = entry["fill"]
                cut = f"; CUT SHORT at {have:,} by BENCH_SCALE_FILL_BUDGET_S" if f["cut_short"] else ""
                rate = f"{f['rows_per_s'] or 0:,} rows/s"
                log(f"  filled {f['rows']:,} rows in {f['seconds']:.0f} s ({rate}){cut}")
            entry["rows_in_table"] = have
            log(f"scale: measuring at {have:,} finished jobs (+ {SCALE_BACKLOG:,} pending, paused)")
            entry.update(await measure(bench, api, counters, lay, index, ids))
            res["sizes"].append(entry)
            if have < size:
                break  # the budget cut this size short: a larger one would be cut shorter still
    finally:
        api.proc.stop()
    res["disk_free_gb_after"] = round(shutil.disk_usage(bench.work).free / 2**30, 1)
    res["seconds"] = round(time.perf_counter() - began, 1)
    log(f"  scale phase took {res['seconds']:.0f} s")
