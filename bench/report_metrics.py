"""Issue 12's part of the results: the rows (throughput with metrics on ÷ off, the /metrics scrape) and the
notes of the metrics phase (every run's figure, the fill, the plans of the state reads)."""

from __future__ import annotations

from typing import Any

from bench.targets import Row


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
            f"≥ {1 - target / 100:.2f}× (≤ {target:g} % lower; issue 12)", verdict,
        ))  # fmt: skip
    sc = met["scrape"]
    u, c, n = sc["uncached"], sc["cached"], sc["fill"]["rows"]
    ok: bool | str = u["p95_ms"] < sc["target_ms"]
    if n != sc["target_rows"]:
        ok = f"{'yes' if ok else 'no'} at {n:,} rows (target: {sc['target_rows']:,})"
    rows.append(Row(
        f"GET /metrics with {n:,} job rows, uncached: p50 / p95", f"{u['p50_ms']:.1f} / {u['p95_ms']:.1f} ms",
        f"cached (METRICS_CACHE_S=5) {c['p50_ms']:.1f} / {c['p95_ms']:.1f} ms", u["p95_ms"] / c["p95_ms"],
        f"< {sc['target_ms']:g} ms (p95; issue 12)", ok,
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
