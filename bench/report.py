"""The benchmark's results: the markdown table with its ratios and targets, the notes (where the time
goes, whether the machine was shared), and the files bench/results/<date>.json and .md."""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import statistics
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from bench.common import MYSQL_FLUSH_AT_COMMIT, PHASES, RESULTS_DIR, ROOT, SCALE, version_of
from bench.context import Bench

# A run is flagged noisy when processes it did not start used this much of a core during a measurement.
NOISY_OTHERS_PCT = 25
PACKAGES = ("arq", "celery", "fastapi", "uvicorn", "sqlalchemy", "asyncmy", "redis", "uvloop", "httptools")


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


def build_rows(res: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    sub = res.get("submit")
    if sub:
        t, j = sub["trivial"], sub["jobs"]
        ratio = j["ok_rps"] / t["ok_rps"]
        rows.append(Row(
            "submit: accepted jobs/s (64 clients)", f"{j['ok_rps']:,.0f}/s",
            f"trivial POST {t['ok_rps']:,.0f}/s", ratio, "≥ 1,200/s and ≥ 0.43×",
            j["ok_rps"] >= 1200 and ratio >= 0.43,
        ))  # fmt: skip
        rows.append(Row(
            "submit: p50 latency", f"{j['p50_ms']:.1f} ms", f"trivial POST {t['p50_ms']:.1f} ms",
            j["p50_ms"] / t["p50_ms"], "—", None,
        ))  # fmt: skip
        rows.append(Row(
            "submit: p99 latency", f"{j['p99_ms']:.1f} ms", f"trivial POST {t['p99_ms']:.1f} ms",
            j["p99_ms"] / t["p99_ms"], "≤ 100 ms", j["p99_ms"] <= 100,
        ))  # fmt: skip
    drain = res.get("drain")
    if drain:
        for w in (1, 2):
            ours, raw = drain[f"ours_{w}w"]["jobs_per_s"], drain[f"raw_arq_{w}w"]["jobs_per_s"]
            rows.append(Row(
                f"drain, {w} worker process{'es' if w > 1 else ''}: jobs/s to done in MySQL",
                f"{ours:,.0f}/s", f"raw arq, {w} proc, same settings {raw:,.0f}/s", ours / raw, "≥ 1.0×",
                ours / raw >= 1.0,
            ))  # fmt: skip
        ours, cel = drain["ours_2w"]["jobs_per_s"], drain["celery_prefork2"]["jobs_per_s"]
        rows.append(Row(
            "drain, 2 worker processes vs Celery", f"{ours:,.0f}/s",
            f"Celery prefork 2 + MySQL results {cel:,.0f}/s", ours / cel, "≥ 3×", ours / cel >= 3,
        ))  # fmt: skip
    pick = res.get("pickup")
    if pick:
        o, same, dflt = pick["ours"], pick["raw_arq_same_poll"], pick["raw_arq_default_poll"]
        poll = f"poll {same['poll_delay_s']:g} s"
        rows.append(Row(
            "pickup latency p50 (POST sent → started)", f"{o['p50_ms']:.1f} ms",
            f"raw arq {poll} {same['p50_ms']:.1f} ms", o["p50_ms"] / same["p50_ms"], "≤ 10 ms",
            o["p50_ms"] <= 10,
        ))  # fmt: skip
        rows.append(Row(
            "pickup latency p99", f"{o['p99_ms']:.1f} ms", f"raw arq {poll} {same['p99_ms']:.1f} ms",
            o["p99_ms"] / same["p99_ms"], "≤ 25 ms", o["p99_ms"] <= 25,
        ))  # fmt: skip
        rows.append(Row(
            "pickup latency p50 vs arq defaults", f"{o['p50_ms']:.1f} ms",
            f"raw arq poll 0.5 s {dflt['p50_ms']:.1f} ms", o["p50_ms"] / dflt["p50_ms"], "—", None,
        ))  # fmt: skip
        idle, idle_raw = o["idle_cpu_pct_of_core"], same["idle_cpu_pct_of_core"]
        rows.append(Row(
            "idle worker CPU", f"{idle:.2f} % of a core", f"raw arq {poll} {idle_raw:.2f} %",
            idle / idle_raw if idle_raw > 0 else None, "≤ 1 %", idle <= 1.0,
        ))  # fmt: skip
    mem = res.get("memory")
    if mem:
        rows.append(Row(
            f"worker RSS over {mem['jobs']:,} jobs"
            + (f" (time-boxed, {mem['jobs_wanted']:,} wanted)" if mem["time_boxed"] else ""),
            f"{mem['rss_end_mb']:.1f} MB (+{mem['growth_pct_from_warm']:.1f} %)",
            f"RSS after {mem['warm_up_jobs']:,}-job warm-up {mem['rss_warm_mb']:.1f} MB",
            mem["rss_end_mb"] / mem["rss_warm_mb"], f"growth ≤ 5 % over {mem['jobs_wanted']:,}",
            "n/a (cut short)" if mem["time_boxed"] else mem["growth_pct_from_warm"] <= 5,
        ))  # fmt: skip
    rows += metrics_rows(res)
    return rows


def metrics_rows(res: dict[str, Any]) -> list[Row]:
    """Issue 12: throughput with metrics on ÷ off (medians of interleaved runs), and the /metrics scrape."""
    met = res.get("metrics")
    if not met:
        return []
    rows: list[Row] = []
    labels = {
        "submit": "submit: accepted jobs/s, 64 clients",
        "drain": f"drain {met['drain_jobs']:,} jobs, {met['drain_workers']} worker: jobs/s",
    }
    target = met["target_pct"]
    for key, label in labels.items():
        fig = met[key]
        verdict: bool | str = fig["met"]
        if fig["noisy"]:
            verdict = f"noisy (spread {fig['spread_pct']:.1f} %; {'yes' if fig['met'] else 'no'} as measured)"
        rows.append(Row(
            f"metrics on vs off, {label} (median of {len(fig['on'])})", f"on {fig['median_on']:,.0f}/s",
            f"metrics off {fig['median_off']:,.0f}/s", fig["ratio_on_off"],
            f"≥ {1 - target / 100:.2f}× (≤ {target:g} % lower)", verdict,
        ))  # fmt: skip
    sc = met["scrape"]
    u, c, n = sc["uncached"], sc["cached"], sc["fill"]["rows"]
    ok: bool | str = u["p95_ms"] < sc["target_ms"]
    if n != sc["target_rows"]:
        ok = f"{'yes' if ok else 'no'} at {n:,} rows (target: {sc['target_rows']:,})"
    rows.append(Row(
        f"GET /metrics with {n:,} job rows, uncached: p50 / p95", f"{u['p50_ms']:.1f} / {u['p95_ms']:.1f} ms",
        f"cached (METRICS_CACHE_S=5) {c['p50_ms']:.1f} / {c['p95_ms']:.1f} ms", u["p95_ms"] / c["p95_ms"],
        f"< {sc['target_ms']:g} ms (p95)", ok,
    ))  # fmt: skip
    return rows


def counted_note(met: dict[str, Any]) -> str:
    """That "on" counted and "off" did not: the last scrape of each "on" run, and the "off" API at the end."""
    api = [s for r in met["submit"]["runs"] for s in r["scrapes"].values()]
    drain = [s for r in met["drain"]["runs"] for s in r["scrapes"].values()]  # the worker's, and the API's
    submitted = max((s.get("last_reports_jobs_submitted_total") or 0 for s in api), default=0)
    attempts = max((s.get("last_reports_attempts_finished_total") or 0 for s in drain), default=0)
    off = met["off_api_counted_submits"]
    return (
        f'Checked: the last scrapes counted {submitted:,.0f} submitted jobs (the "on" API) and '
        f'{attempts:,.0f} succeeded attempts (an "on" worker); the "off" API counted {off:,.0f}.'
    )


def metrics_note(res: dict[str, Any]) -> list[str]:
    """How the metrics phase measured, every run's figure, the fill, and the plans of the state reads."""
    met = res.get("metrics")
    if not met:
        return []

    def each(values: list[float], fmt: str) -> str:
        return " / ".join(format(v, fmt) for v in values)

    lines = [
        f'Metrics on vs off (issue 12): runs alternate {", ".join(met["order"])}. During the "on" runs the '
        f"API's /metrics (and in the drain the worker's METRICS_PORT) is scraped every "
        f"{met['scrape_every_s']:g} s, as Prometheus would. Submit: {met['submit_seconds']:g} s per run, 64 "
        f"clients; drain: {met['drain_jobs']:,} no-op jobs per run. Spread = (max − min) ÷ median of one "
        f"side's repeats; **noisy** when it exceeds the {met['target_pct']:g} % to be resolved. CPU per job: "
        "the API or worker process alone (the figure other load on the machine changes least). "
        + counted_note(met),
        "",
        "| path | on, each run | off, each run | on ÷ off, each pair | spread on / off | "
        "CPU ms per job on / off | others' CPU on / off |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, unit in (("submit", "accepted/s"), ("drain", "jobs/s")):
        fig = met[key]
        cpu, others = fig["cpu_ms_per_job"], fig["others_cpu_pct_median"]
        lines.append(
            f"| {key} ({unit}) | {each(fig['on'], ',.0f')} | {each(fig['off'], ',.0f')} | "
            f"{each(fig['pair_ratios'], '.3f')} | "
            f"{fig['spread_on_pct']:.1f} % / {fig['spread_off_pct']:.1f} % | "
            f"{cpu['median_on']:.2f} / {cpu['median_off']:.2f} ({cpu['diff_pct']:+.1f} %) | "
            f"{others['on']:.0f} % / {others['off']:.0f} % |"
        )
    sc = met["scrape"]
    f, u, c, st = sc["fill"], sc["uncached"], sc["cached"], sc["state_round"]
    by_status = ", ".join(f"{k} {v:,}" for k, v in sorted(f["by_status"].items(), key=lambda kv: -kv[1]))
    queries = ", ".join(f"{k} {v:.1f}" for k, v in st["queries_p50_ms"].items())
    lines += [
        "",
        f"Scrape: report_jobs filled with {f['rows']:,} rows ({by_status}), "
        f"{f['tables']['dead_letters']:,} dead letters with their alert deliveries and "
        f"{f['tables']['callback_deliveries']:,} completion callbacks ({f['report_jobs_mb']:,} MB of "
        f"report_jobs with its indexes), in {f['seconds']:.1f} s: INSERT … SELECT from {f['generator']} in "
        f"{f['chunk_rows']:,}-row chunks {f['report_jobs_s']:.1f} s, secondary indexes built afterwards "
        f"{f['indexes_s']:.1f} s, letters, alerts and callbacks {f['letters_alerts_callbacks_s']:.1f} s.",
        "",
        f"{u['n']} GET /metrics back to back: uncached (METRICS_CACHE_S=0) p50 {u['p50_ms']:.1f}, "
        f"p95 {u['p95_ms']:.1f}, max {u['max_ms']:.1f} ms (the first {u['first_ms']:.1f} ms); cached p50 "
        f"{c['p50_ms']:.1f}, p95 {c['p95_ms']:.1f} ms; {u['body_bytes']:,} bytes with "
        f"{u['reports_jobs_series']} `reports_jobs` series. The state reads alone (in process, no HTTP): "
        f"p50 {st['round']['p50_ms']:.1f}, p95 {st['round']['p95_ms']:.1f} ms a round; each query's p50 "
        f"(ms): {queries}. Their plans (EXPLAIN; query cache {st['query_cache_type']}):",
        "",
        "| query | table | access | key | rows | extra |",
        "|---|---|---|---|---|---|",
    ]
    for plan in st["explain"]:
        sql = plan["sql"][:70].replace("|", "\\|")
        for step in plan["plan"]:
            lines.append(
                f"| `{sql}…` | {step['table']} | {step['type']} | {step['key'] or '—'} | {step['rows']} | "
                f"{step['Extra'] or ''} |"
            )
    return lines


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
    header = ["what", "ours", "baseline (same run)", "ratio ours÷baseline", "target (issue 8 / 12)", "met?"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in build_rows(res)]
    m = res["machine"]
    flush = m.get("flush_at_commit", MYSQL_FLUSH_AT_COMMIT)
    notes = [
        f"# Benchmark {res['date']} (BENCH_SCALE={res['scale']:g}"
        + ("" if phases_run(res) == list(PHASES) else f", BENCH_PHASES={','.join(phases_run(res))}")
        + ")",
        "",
        f"Machine: {m['nproc']} × {m['cpu_model']}, {m['memory']}; Python {m['python']}; {m['mariadb']}; "
        f"{m['redis']}; commit {m['git_commit'][:10]}{' (dirty tree)' if m['git_dirty'] else ''}; "
        f"total {res['total_seconds']:.0f} s.",
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
    return "\n".join(notes) + "\n"


META_CPU_KEYS = frozenset({"mariadbd", "redis", "bench_runner", "load_generator", "machine", "others"})


def cost_section(res: dict[str, Any]) -> list[str]:
    rows = cost_rows(res)
    if not rows:
        return []
    return [
        "Where the time goes (CPU of a process ÷ its rate; MySQL counters from SHOW GLOBAL STATUS, "
        "the benchmark's own progress polls subtracted):",
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
    labels = {
        "ours_1w": "drain: ours, 1 worker",
        "ours_2w": "drain: ours, 2 workers",
        "raw_arq_1w": "drain: raw arq, 1 worker",
        "raw_arq_2w": "drain: raw arq, 2 workers",
        "celery_prefork2": "drain: Celery prefork 2",
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
            f"{mysql['Questions']:.1f} / {mysql['Com_commit']:.1f} / {mysql['Innodb_data_fsyncs']:.1f}"
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
    """How the submit, drain and pickup figures were taken (only those of the phases that ran)."""
    note = ""
    if "submit" in res:
        note += (
            f"Submit: `{res.get('api_command', '')}`, load from {res['load_generator']} in its own process. "
        )
    if "drain" in res:
        note += (
            "Drain: jobs queued with the workers stopped; rate from the first completion seen to the last. "
        )
    if "pickup" in res:
        note += (
            "Pickup: one job at a time on an idle system, each pause ending at a random point of the poll "
            "cycle; latency = the attempt's `started_at` − the moment just before the POST was sent "
            "(raw arq: the function's first line − the moment just before `enqueue_job` was called). "
            "Idle CPU: the worker alone, 1 s after its last job. "
        )
    return note


def memory_note(res: dict[str, Any]) -> str:
    mem = res.get("memory")
    if not mem:
        return ""
    return (
        f"Memory: RSS of one worker, growth counted from after a {mem['warm_up_jobs']:,}-job warm-up "
        f"(from its idle start: {mem['rss_cold_mb']:.1f} → {mem['rss_end_mb']:.1f} MB, "
        f"+{mem['growth_pct_from_cold']:.1f} %). "
    )


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
    """Write bench/results/<stem>.json and .md (stem: the date, plus -scale<S> when scaled down and the
    phases when not all of the default ones ran); the stem."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stem = res["date"] if SCALE == 1 else f"{res['date']}-scale{SCALE:g}"
    if phases_run(res) != list(PHASES):
        stem += "-" + "-".join(phases_run(res))
    (RESULTS_DIR / f"{stem}.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
    (RESULTS_DIR / f"{stem}.md").write_text(markdown(res))
    return stem
