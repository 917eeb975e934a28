"""The summary table: one row per figure, ours against a baseline measured in the same run, with issue 15's
targets (the memory row keeps issue 8's, the fair-share rows issue 16's; bench/report_metrics.py adds issue
12's rows)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# Issue 15's targets.
DRAIN_VS_CELERY = 2.0  # drain, 2 worker processes, ≥ 2.0× Celery prefork 2 with MySQL state
DRAIN_VS_ARQ_DEFAULTS = 3.0  # … and ≥ 3× raw arq at arq's default settings
DRAIN_VS_DRAMATIQ = 2.0  # issue 28: ≥ 2× Dramatiq (Redis broker) writing a MySQL status row per job
WORKER_CPU_MS = 1.5  # worker CPU per job
STATEMENTS_PER_JOB = (
    4.0  # MySQL statements per job (Questions: every statement a client sends, COMMIT included)
)
FSYNCS_PER_JOB = 1.0  # InnoDB fsyncs per job (Innodb_data_fsyncs: redo log and data files alike)
SINGLE_VS_TRIVIAL = 0.25  # single submit ≥ 0.25× the trivial POST …
P99_VS_TRIVIAL = 2.0  # … with p99 ≤ 2× the trivial POST's p99
BULK_JOBS_PER_S = 10_000  # bulk submit, persisted and enqueued, batches of 500
PICKUP_P50_MS = 5.0
PICKUP_P99_MS = 20.0
IDLE_CPU_PCT = 1.0  # % of one core
MEMORY_GROWTH_PCT = 5.0  # issue 8: RSS growth over 50,000 jobs after the warm-up
# Issue 16's.
FAIR_WAIT_SLOTS = 2.0  # tenant B's 10 jobs all start before A starts another 2 × (worker slots) jobs
CAP_NOT_BINDING_RATIO = 0.95  # a report-type cap that never binds costs at most 5 % of the drain rate

# CPU meter entries that are not the processes under test.
META_CPU_KEYS = frozenset({"mariadbd", "redis", "bench_runner", "load_generator", "machine", "others"})


@dataclass
class Row:
    what: str
    ours: str
    baseline: str
    ratio: float | None
    target: str
    met: bool | str | None

    def cells(self) -> list[str]:
        ratio = "—" if self.ratio is None or math.isnan(self.ratio) else f"{self.ratio:.2f}×"
        if isinstance(self.met, str):
            met = self.met
        else:
            met = "—" if self.met is None else ("yes" if self.met else "**no**")
        return [self.what, self.ours, self.baseline, ratio, self.target, met]


def app_cpu_ms(fig: dict[str, Any], rate: float) -> float:
    """CPU milliseconds per job of the processes under test (workers, API): their % of a core ÷ the rate."""
    app_pct = sum(v for k, v in fig.get("cpu_pct", {}).items() if k not in META_CPU_KEYS)
    return 10.0 * app_pct / rate if rate else math.nan


def processes(n: int) -> str:
    return f"{n} process{'es' if n != 1 else ''}"


def submit_rows(res: dict[str, Any]) -> list[Row]:
    sub = res.get("submit")
    if not sub:
        return []
    t, j = sub["trivial"], sub["jobs"]
    n = processes(res.get("api_workers", 1))
    ratio, p99_ratio = j["ok_rps"] / t["ok_rps"], j["p99_ms"] / t["p99_ms"]
    return [
        Row(
            f"submit, single: accepted jobs/s (64 clients; API: uvicorn, {n})", f"{j['ok_rps']:,.0f}/s",
            f"trivial POST, same server ({n}) {t['ok_rps']:,.0f}/s", ratio, f"≥ {SINGLE_VS_TRIVIAL:g}×",
            ratio >= SINGLE_VS_TRIVIAL,
        ),
        Row(
            "submit, single: p99 latency", f"{j['p99_ms']:.1f} ms", f"trivial POST {t['p99_ms']:.1f} ms",
            p99_ratio, f"≤ {P99_VS_TRIVIAL:g}× trivial's", p99_ratio <= P99_VS_TRIVIAL,
        ),
        Row(
            "submit, single: p50 latency", f"{j['p50_ms']:.1f} ms", f"trivial POST {t['p50_ms']:.1f} ms",
            j["p50_ms"] / t["p50_ms"], "—", None,
        ),
    ]  # fmt: skip


def bulk_rows(res: dict[str, Any]) -> list[Row]:
    bulk = res.get("bulk")
    if not bulk:
        return []
    what = f"submit, bulk: jobs/s persisted and enqueued ({bulk['batch']} a batch, {bulk['clients']} clients)"
    target = f"≥ {BULK_JOBS_PER_S:,}/s"
    if bulk.get("skipped"):
        return [Row(what, "not measured", bulk["skipped"], None, target, "n/a (skipped)")]
    rate = bulk["jobs_per_s"]
    single = res.get("submit", {}).get("jobs", {}).get("ok_rps")
    met: bool | str = rate >= BULK_JOBS_PER_S
    if not bulk["verified"]:
        met = (
            f"**no**: {bulk['rows_in_mysql']:,} rows in MySQL and {bulk['queued_in_redis']:,} in the arq "
            f"queue for {bulk['created']:,} created"
        )
    return [
        Row(
            what, f"{rate:,.0f}/s", f"single submit {single:,.0f}/s" if single else "—",
            rate / single if single else None, target, met,
        )
    ]  # fmt: skip


def drain_rows(res: dict[str, Any]) -> list[Row]:
    drain = res.get("drain")
    if not drain or "ours_2w" not in drain:
        return []
    o = drain["ours_2w"]
    ours = o["jobs_per_s"]
    what = "drain, 2 worker processes: jobs/s to done in MySQL"
    rows: list[Row] = []
    cel = drain.get("celery_prefork2")
    if cel:
        ratio = ours / cel["jobs_per_s"]
        rows.append(Row(
            f"{what}, vs Celery", f"{ours:,.0f}/s",
            f"Celery prefork 2 + MySQL results {cel['jobs_per_s']:,.0f}/s", ratio,
            f"≥ {DRAIN_VS_CELERY:.1f}×", ratio >= DRAIN_VS_CELERY,
        ))  # fmt: skip
    dram = drain.get("dramatiq_2p")
    if dram:
        ratio = ours / dram["jobs_per_s"]
        rows.append(Row(
            f"{what}, vs Dramatiq", f"{ours:,.0f}/s",
            f"Dramatiq, {dram['processes']} proc × {dram['threads_per_process']} threads, Redis + MySQL "
            f"status row {dram['jobs_per_s']:,.0f}/s",
            ratio, f"≥ {DRAIN_VS_DRAMATIQ:.1f}× (issue 28)", ratio >= DRAIN_VS_DRAMATIQ,
        ))  # fmt: skip
    dflt = drain.get("raw_arq_defaults_2w")
    if dflt:
        s, ratio = dflt["settings"], ours / dflt["jobs_per_s"]
        rows.append(Row(
            f"{what}, vs raw arq at its defaults", f"{ours:,.0f}/s",
            f"raw arq, 2 proc, arq's defaults (poll {s['poll_delay']:g} s, max_jobs {s['max_jobs']}) "
            f"{dflt['jobs_per_s']:,.0f}/s",
            ratio, f"≥ {DRAIN_VS_ARQ_DEFAULTS:g}×", ratio >= DRAIN_VS_ARQ_DEFAULTS,
        ))  # fmt: skip
    same = drain.get("raw_arq_2w")
    if same:
        s = same.get("settings") or {}
        settings = f" (poll {s['poll_delay']:g} s, max_jobs {s['max_jobs']})" if s else ""
        rows.append(Row(
            f"{what}, vs raw arq at our settings", f"{ours:,.0f}/s",
            f"raw arq, 2 proc, our settings{settings} {same['jobs_per_s']:,.0f}/s", ours / same["jobs_per_s"],
            "—", None,
        ))  # fmt: skip
    cpu = app_cpu_ms(o, ours)
    if cel:
        cel_cpu = app_cpu_ms(cel, cel["jobs_per_s"])
        raw = f"; raw arq {app_cpu_ms(same, same['jobs_per_s']):.2f} ms" if same else ""
        rows.append(Row(
            "drain, 2 worker processes: worker CPU per job", f"{cpu:.2f} ms",
            f"Celery prefork 2 (all processes) {cel_cpu:.2f} ms{raw}", cpu / cel_cpu if cel_cpu else None,
            f"≤ {WORKER_CPU_MS:g} ms", cpu <= WORKER_CPU_MS,
        ))  # fmt: skip
    mysql, cel_mysql = o.get("mysql_per_job"), (cel or {}).get("mysql_per_job")
    if mysql:
        q, c, f = mysql["Questions"], mysql["Com_commit"], mysql["Innodb_data_fsyncs"]
        rows.append(Row(
            "drain, 2 worker processes: MySQL statements per job (Questions)",
            f"{q:.1f} (of which {c:.1f} COMMIT)",
            f"Celery {cel_mysql['Questions']:.1f}" if cel_mysql else "—",
            q / cel_mysql["Questions"] if cel_mysql else None, f"≤ {STATEMENTS_PER_JOB:g}",
            q <= STATEMENTS_PER_JOB,
        ))  # fmt: skip
        rows.append(Row(
            "drain, 2 worker processes: InnoDB fsyncs per job (Innodb_data_fsyncs)", f"{f:.2f}",
            f"Celery {cel_mysql['Innodb_data_fsyncs']:.2f}" if cel_mysql else "—",
            f / cel_mysql["Innodb_data_fsyncs"] if cel_mysql and cel_mysql["Innodb_data_fsyncs"] else None,
            f"≤ {FSYNCS_PER_JOB:g}", f <= FSYNCS_PER_JOB,
        ))  # fmt: skip
    return rows


def pickup_rows(res: dict[str, Any]) -> list[Row]:
    pick = res.get("pickup")
    if not pick:
        return []
    o, dflt = pick["ours"], pick["raw_arq_default_poll"]
    base = f"raw arq, poll {dflt['poll_delay_s']:g} s" + (
        " (arq's defaults)" if dflt.get("arq_defaults") else ""
    )
    rows = [
        Row(
            "pickup latency p50 (just before POST sent → attempt started)", f"{o['p50_ms']:.1f} ms",
            f"{base} {dflt['p50_ms']:.1f} ms", o["p50_ms"] / dflt["p50_ms"], f"≤ {PICKUP_P50_MS:g} ms",
            o["p50_ms"] <= PICKUP_P50_MS,
        ),
        Row(
            "pickup latency p99", f"{o['p99_ms']:.1f} ms", f"{base} {dflt['p99_ms']:.1f} ms",
            o["p99_ms"] / dflt["p99_ms"], f"≤ {PICKUP_P99_MS:g} ms", o["p99_ms"] <= PICKUP_P99_MS,
        ),
    ]  # fmt: skip
    same = pick.get("raw_arq_same_poll")
    if same and not same.get("same_run_as"):
        rows.append(Row(
            "pickup latency p50 vs raw arq at our poll delay", f"{o['p50_ms']:.1f} ms",
            f"raw arq, poll {same['poll_delay_s']:g} s {same['p50_ms']:.1f} ms", o["p50_ms"] / same["p50_ms"],
            "—", None,
        ))  # fmt: skip
    idle, idle_raw = o["idle_cpu_pct_of_core"], dflt["idle_cpu_pct_of_core"]
    rows.append(Row(
        "idle worker CPU", f"{idle:.2f} % of a core", f"{base} {idle_raw:.2f} %",
        idle / idle_raw if idle_raw > 0 else None, f"≤ {IDLE_CPU_PCT:g} %", idle <= IDLE_CPU_PCT,
    ))  # fmt: skip
    return rows


def memory_rows(res: dict[str, Any]) -> list[Row]:
    mem = res.get("memory")
    if not mem:
        return []
    return [
        Row(
            f"worker RSS over {mem['jobs']:,} jobs"
            + (f" (time-boxed, {mem['jobs_wanted']:,} wanted)" if mem["time_boxed"] else ""),
            f"{mem['rss_end_mb']:.1f} MB (+{mem['growth_pct_from_warm']:.1f} %)",
            f"RSS after {mem['warm_up_jobs']:,}-job warm-up {mem['rss_warm_mb']:.1f} MB",
            mem["rss_end_mb"] / mem["rss_warm_mb"],
            f"growth ≤ {MEMORY_GROWTH_PCT:g} % over {mem['jobs_wanted']:,} (issue 8)",
            "n/a (cut short)" if mem["time_boxed"] else mem["growth_pct_from_warm"] <= MEMORY_GROWTH_PCT,
        )
    ]  # fmt: skip


def fairness_rows(res: dict[str, Any]) -> list[Row]:
    fair = res.get("fairness")
    if not fair:
        return []
    sc, caps = fair["scenario"], fair["caps"]
    # Judged from the moment B's jobs were accepted (the submit returned: they exist and sit in their lanes);
    # the figure counted from before the submit call (adding the submit's own time under load) is shown too.
    wait = sc["b_wait_slots_after_queued"]
    met: bool | str = wait <= FAIR_WAIT_SLOTS
    if not sc["a_had_backlog"]:
        met = "n/a (A's backlog was gone before B's last start)"
    rate, slots = caps["jobs_per_s"], caps["slots"]
    none = f"no cap, same run {rate['none']:,.0f}/s"
    return [
        Row(
            f"fair share: tenant B's worst wait ({sc['tenant_b_jobs']} jobs submitted behind tenant A's "
            f"{sc['tenant_a_jobs']:,}), in job slots (A's starts meanwhile ÷ {sc['slots']} slots)",
            f"{wait:.2f} slots from B's jobs accepted (from before B's submit call: {sc['b_wait_slots']:.2f} "
            f"slots, {sc['a_started_meanwhile']} of A's jobs, {sc['b_worst_wait_ms']:.0f} ms)",
            f"time order (FIFO): A's backlog at B's submit {sc['fifo_wait_slots']:.1f} slots",
            wait / sc["fifo_wait_slots"] if sc["fifo_wait_slots"] else None,
            f"≤ {FAIR_WAIT_SLOTS:g} slots (issue 16)", met,
        ),
        Row(
            f"drain, {caps['workers']} worker processes, type cap {caps['caps']['not_binding']} ≥ {slots} "
            "slots (not binding): jobs/s",
            f"{rate['not_binding']:,.0f}/s", none, caps["not_binding_vs_none"],
            f"≥ {CAP_NOT_BINDING_RATIO:g}× (issue 16)", caps["not_binding_vs_none"] >= CAP_NOT_BINDING_RATIO,
        ),
        Row(
            f"drain, {caps['workers']} worker processes, type cap {caps['caps']['binding']} of {slots} slots "
            f"(binding; at most {caps['binding_most_running_at_once']} ran at once): jobs/s",
            f"{rate['binding']:,.0f}/s", none, caps["binding_vs_none"], "—", None,
        ),
    ]  # fmt: skip


def build_rows(res: dict[str, Any]) -> list[Row]:
    """Issue 15's rows, in the order of its "Must show", then memory (issue 8), then fair share (issue 16)."""
    return [
        *submit_rows(res), *bulk_rows(res), *drain_rows(res), *pickup_rows(res), *memory_rows(res),
        *fairness_rows(res),
    ]  # fmt: skip
