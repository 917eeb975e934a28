"""The benchmark's results: the markdown table with its ratios and targets (bench/targets.py), the notes
(how each figure is taken, where the time goes, whether the machine was shared), and the files
bench/results/<date>.json and .md."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from bench.common import MYSQL_FLUSH_AT_COMMIT, PHASES, RESULTS_DIR, ROOT, SCALE, version_of
from bench.context import Bench
from bench.report_metrics import metrics_note, metrics_rows
from bench.report_scale import scale_note
from bench.report_sql import sql_rows
from bench.targets import META_CPU_KEYS, build_rows

__all__ = ["META_CPU_KEYS", "machine_info", "markdown", "write_results"]

# A run is flagged noisy when processes it did not start used this much of a core during a measurement.
NOISY_OTHERS_PCT = 25
PACKAGES = (
    "arq",
    "celery",
    "dramatiq",
    "fastapi",
    "uvicorn",
    "sqlalchemy",
    "asyncmy",
    "redis",
    "uvloop",
    "httptools",
)


def machine_info(bench: Bench) -> dict[str, Any]:
    """The machine, the software versions and the git commit that the figures belong to."""
    cpu_model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    mem_total = "unknown"
    with contextlib.suppress(OSError):
        mem_total = Path("/proc/meminfo").read_text().splitlines()[0].split(":", 1)[1].strip()
    commit = version_of(["git", "-C", str(ROOT), "rev-parse", "HEAD"])
    dirty = bool(version_of(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"]))
    packages: dict[str, str] = {}
    for name in PACKAGES:
        with contextlib.suppress(PackageNotFoundError):
            packages[name] = version(name)
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory": mem_total,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "mariadb": version_of([bench.mariadb.mariadbd, "--version"]),
        "redis": version_of([bench.redis.binary, "--version"]),
        "wrk": version_of([bench.wrk, "-v"]).splitlines()[0] if bench.wrk else None,
        "git_commit": commit,
        "git_dirty": dirty,
        "packages": packages,
        "innodb_options": list(bench.mariadb.INNODB_OPTIONS),
        "flush_at_commit": MYSQL_FLUSH_AT_COMMIT,
    }


def interference(res: dict[str, Any]) -> list[float]:
    """Every `others` CPU figure in the results: load on the machine that this run did not cause."""
    found: list[float] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("others"), int | float) and "machine" in value:
                found.append(float(value["others"]))
            for child in value.values():
                walk(child)
        elif isinstance(value, list):  # the metrics phase keeps each of its runs in a list
            for child in value:
                walk(child)

    walk(res)
    return found


def markdown(res: dict[str, Any]) -> str:
    header = [
        "what",
        "ours",
        "baseline (same run)",
        "ratio ours÷baseline",
        "target (issue 15 unless noted)",
        "met?",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += [
        "| " + " | ".join(row.cells()) + " |"
        for row in [*build_rows(res), *metrics_rows(res), *sql_rows(res)]
    ]
    m = res["machine"]
    flush = m.get("flush_at_commit", MYSQL_FLUSH_AT_COMMIT)
    notes = [
        f"# Benchmark {res['date']} (BENCH_SCALE={res['scale']:g}"
        + ("" if phases_run(res) == list(PHASES) else f", BENCH_PHASES={','.join(phases_run(res))}")
        + ")",
        "",
        f"Machine: {m['nproc']} × {m['cpu_model']}, {m['memory']}; Python {m['python']}; {m['mariadb']}; "
        f"{m['redis']}; commit {m['git_commit'][:10]}{' (dirty tree)' if m['git_dirty'] else ''}; "
        f"total {res['total_seconds']:.0f} s"
        + (
            f" ({', '.join(f'{k} {v:.0f} s' for k, v in res['phase_seconds'].items())})"
            if res.get("phase_seconds")
            else ""
        )
        + ".",
        "",
        *lines,
        "",
        "Ratios are ours ÷ baseline: above 1 is better for throughput, below 1 is better for latency.",
        interference_note(res),
        "",
        *cost_section(res),
        method_note(res) + memory_note(res) + f"MariaDB innodb_flush_log_at_trx_commit={flush}. "
        "Raw figures: the JSON beside this file.",
    ]
    metrics = metrics_note(res)
    if metrics:
        notes += ["", *metrics]
    scale = scale_note(res)
    if scale:
        notes += ["", *scale]
    return "\n".join(notes) + "\n"


def cost_section(res: dict[str, Any]) -> list[str]:
    rows = cost_rows(res)
    if not rows:
        return []
    return [
        "Where the time goes (CPU of a process ÷ its rate, both over the same window: for the drains from "
        "the first completion seen to the last, so the workers' start-up is not charged to the jobs; MySQL "
        "counters from SHOW GLOBAL STATUS, the benchmark's own progress polls subtracted):",
        "",
        *rows,
        "",
    ]


def cost_rows(res: dict[str, Any]) -> list[str]:
    """Where the time goes: CPU milliseconds per job in each process kind, and MySQL work per job."""
    cases: list[tuple[str, float, dict[str, Any]]] = []
    sub = res.get("submit", {})
    for key, label in (("trivial", "submit: trivial POST"), ("jobs", "submit: POST /v1/jobs")):
        if key in sub:
            cases.append((label, sub[key]["ok_rps"], sub[key]))
    bulk = res.get("bulk", {})
    if bulk.get("jobs_per_s"):
        cases.append(("submit: POST /v1/jobs/batch (per job)", bulk["jobs_per_s"], bulk))
    labels = {
        "ours_1w": "drain: ours, 1 worker",
        "ours_2w": "drain: ours, 2 workers",
        "raw_arq_1w": "drain: raw arq, 1 worker",
        "raw_arq_2w": "drain: raw arq, our settings, 2 workers",
        "raw_arq_defaults_2w": "drain: raw arq, arq's defaults, 2 workers",
        "celery_prefork2": "drain: Celery prefork 2",
        "dramatiq_2p": "drain: Dramatiq, 2 processes × 8 threads",
    }
    for key, label in labels.items():
        if key in res.get("drain", {}):
            cases.append((label, res["drain"][key]["jobs_per_s"], res["drain"][key]))
    if not cases:
        return []
    lines = [
        "| path | jobs/s | CPU ms per job: app processes | MariaDB | Redis | MySQL statements / commits / "
        "fsyncs per job | others' CPU |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, rate, fig in cases:
        cpu = fig.get("cpu_pct", {})
        app_pct = sum(v for k, v in cpu.items() if k not in META_CPU_KEYS)

        def ms(pct_of_core: float, rate: float = rate) -> str:
            return f"{10.0 * pct_of_core / rate:.2f}" if rate else "—"

        mysql = fig.get("mysql_per_job")
        stmts = (
            f"{mysql['Questions']:.3g} / {mysql['Com_commit']:.3g} / {mysql['Innodb_data_fsyncs']:.3g}"
            if mysql
            else "—"
        )
        lines.append(
            f"| {label} | {rate:,.0f} | {ms(app_pct)} | {ms(cpu.get('mariadbd', 0.0))} | "
            f"{ms(cpu.get('redis', 0.0))} | {stmts} | {max(0.0, cpu.get('others', 0.0)):.0f} % |"
        )
    return lines


def phases_run(res: dict[str, Any]) -> list[str]:
    return list(res.get("phases") or PHASES)


def method_note(res: dict[str, Any]) -> str:
    """How the submit, bulk, drain and pickup figures were taken (only those of the phases that ran)."""
    note = ""
    if "submit" in res:
        n = res.get("api_workers", 1)
        note += (
            f"Submit: `{res.get('api_command', '')}`: {n} uvicorn process{'es' if n != 1 else ''} serving "
            "both the job POST and the trivial POST it is compared with (one server, so the same count on "
            f"both sides); load from {res['load_generator']} in its own process. "
        )
    bulk = res.get("bulk")
    if bulk and not bulk.get("skipped"):
        note += (
            f"Bulk: POST /v1/jobs/batch with {bulk['batch']} no-op jobs a request from {bulk['clients']} "
            f"concurrent clients (one request in flight each) for {bulk['seconds']:g} s, no worker running; "
            "rate = jobs created (the answers' `created`) ÷ the wall time from the first request sent to the "
            f"last answer (batch p50 {bulk['batch_p50_ms']:.0f} ms, p99 {bulk['batch_p99_ms']:.0f} ms); "
            f"then {bulk['rows_in_mysql']:,} rows in report_jobs and {bulk['queued_in_redis']:,} entries in "
            f"the arq queue (ZCARD) for {bulk['created']:,} created. "
        )
    elif bulk:
        note += f"Bulk: not measured, {bulk['skipped']}. "
    drain = res.get("drain")
    if drain:
        note += (
            f"Drain: jobs queued ({res.get('queued_with', 'app.jobs.service.submit')}) with the workers "
            "stopped, then 2 worker processes on each side; rate from the first completion seen to the last. "
        )
        same = drain.get("raw_arq_2w", {}).get("settings")
        dflt = drain.get("raw_arq_defaults_2w", {}).get("settings")
        if same and dflt:
            note += (
                f"Raw arq at our settings: poll_delay {same['poll_delay']:g} s, max_jobs {same['max_jobs']}, "
                f"keep_result {same['keep_result']}, our serializer; at arq's defaults: poll_delay "
                f"{dflt['poll_delay']:g} s, max_jobs {dflt['max_jobs']}, keep_result {dflt['keep_result']}, "
                "pickle. "
            )
    if "pickup" in res:
        note += (
            "Pickup: one job at a time on an idle system, each pause ending at a random point of the poll "
            "cycle; latency = the attempt's `started_at` − `time.time()` read immediately before the POST "
            "/v1/jobs was written (its bytes built beforehand, on an open keep-alive connection: no HTTP "
            "client's own work counts), so the request, its commit and the enqueue count (raw arq: the "
            "function's "
            "first line − `time.time()` immediately before `enqueue_job` was called). Both ends read the "
            "same machine's wall clock: the benchmark, the API and the workers run on one host. "
            "Idle CPU: the worker alone, 1 s after its last job. "
        )
    return note + fairness_note(res)


def fairness_note(res: dict[str, Any]) -> str:
    fair = res.get("fairness")
    if not fair:
        return ""
    sc, caps = fair["scenario"], fair["caps"]
    return (
        f"Fair share: tenant A's {sc['tenant_a_jobs']:,} no-op jobs queued (in-process bulk submit), "
        f"{sc['workers']} worker processes × {sc['worker_max_jobs']} slots started on them, and once "
        f"{sc['a_started_when_b_submitted']} had started tenant B submitted {sc['tenant_b_jobs']} in one "
        "batch; B's wait in slots = A's jobs started (job_attempts.started_at, MySQL) after B's submit "
        "returned (B's jobs accepted and in their lanes) up to B's last start ÷ the slots; the figure in "
        "brackets counts from just before B's submit call, so the submit's own "
        f"{sc['b_submit_ms']:.0f} ms under load count too; B's first job started "
        f"{sc['b_first_wait_ms']:.0f} ms after its submit, its last {sc['b_worst_wait_ms']:.0f} ms after, "
        f"with {sc['a_backlog_at_b_last_start']:,} of A's jobs still waiting. Caps: the same drain of "
        f"{caps['jobs']:,} jobs {len(caps['order'])} times in the order {', '.join(caps['order'])} "
        "(REPORT_TYPE_MAX_CONCURRENCY on the workers; each rate the mean of its runs). "
    )


def memory_note(res: dict[str, Any]) -> str:
    mem = res.get("memory")
    if not mem:
        return ""
    note = (
        f"Memory: RSS of one worker, growth counted from after a {mem['warm_up_jobs']:,}-job warm-up "
        f"(from its idle start: {mem['rss_cold_mb']:.1f} → {mem['rss_end_mb']:.1f} MB, "
        f"+{mem['growth_pct_from_cold']:.1f} %)"
    )
    rate = mem.get("jobs_per_s_after_warm_up")
    if rate:
        note += (
            f"; that worker ran {rate:,.0f} jobs/s with {mem['worker_cpu_ms_per_job_after_warm_up']:.2f} ms "
            "of CPU per job after the warm-up"
        )
    if mem["time_boxed"]:
        note += (
            f". **Cut short** after {mem['seconds']:.0f} s, all that the run's {mem['budget_s']:.0f}-s "
            f"budget left it: at that pace the {mem['jobs_wanted']:,} jobs needed about "
            f"{mem['seconds_needed_estimate']:.0f} s; `BENCH_PHASES=memory` alone has the whole budget for "
            "them"
        )
    return note + ". "


def interference_note(res: dict[str, Any]) -> str:
    others = interference(res)
    if not others:
        return ""
    mean, worst = statistics.fmean(others), max(others)
    verdict = (
        "quiet enough to compare."
        if worst < NOISY_OTHERS_PCT
        else "**the machine was shared: figures are noisy, rerun on an idle machine before trusting them.**"
    )
    return (
        f"Processes this run did not start used {mean:.0f} % of a core on average during the measurements "
        f"(worst {worst:.0f} %, of {os.cpu_count() or 0}00 %): {verdict}"
    )


def write_results(res: dict[str, Any]) -> str:
    """Write <RESULTS_DIR>/<stem>.json and .md (stem: the date, plus -scale<S> when scaled down and the
    phases when not all of the default ones ran); the path without its suffix."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stem = res["date"] if SCALE == 1 else f"{res['date']}-scale{SCALE:g}"
    if phases_run(res) != list(PHASES):
        stem += "-" + "-".join(phases_run(res))
    (RESULTS_DIR / f"{stem}.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
    (RESULTS_DIR / f"{stem}.md").write_text(markdown(res))
    return str(RESULTS_DIR / stem)
