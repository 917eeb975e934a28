"""The metrics phase's figures: what a scrape counted, the on ÷ off medians with their spread and pairs,
CPU per job, latency percentiles, and the lines the phase logs about them."""

from __future__ import annotations

import statistics
from typing import Any

from bench.common import pct

TARGET_PCT = 3.0  # issue 12: metrics on costs at most 3 % of the throughput


def family_total(body: str, name: str, **labels: str) -> float:
    """The sum of the samples of metric `name` (e.g. reports_jobs_submitted_total) matching `labels`."""
    total = 0.0
    for line in body.splitlines():
        if not line.startswith(name) or line[len(name) : len(name) + 1] not in ("{", " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def scrape_summary(seen: dict[str, Any], family: str, **labels: str) -> dict[str, Any]:
    """Per target: scrapes that worked, their latency, and what the last one counted of `family`."""
    out: dict[str, Any] = {}
    for url, got in seen.items():
        out[url] = {
            "ok": len(got["ok_ms"]),
            "failed": got["failed"],
            "max_ms": max(got["ok_ms"], default=None),
            f"last_{family}": family_total(got["last"], family, **labels) if got["last"] else None,
        }
    return out


def compare(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """Medians of `key` on and off, their ratio and difference, the ratio within each pair, and the spread
    between repeats. Noisy when either side's spread, (max − min) ÷ median, exceeds the 3 % to resolve."""
    on = [r[key] for r in runs if r["side"] == "on"]
    off = [r[key] for r in runs if r["side"] == "off"]
    med_on, med_off = statistics.median(on), statistics.median(off)
    spread_on = 100.0 * (max(on) - min(on)) / med_on
    spread_off = 100.0 * (max(off) - min(off)) / med_off
    pair_ratios = [
        a[key] / b[key] if a["side"] == "on" else b[key] / a[key]
        for a, b in zip(runs[::2], runs[1::2], strict=True)
    ]
    ratio = med_on / med_off
    spread = max(spread_on, spread_off)
    return {
        "on": [round(v, 3) for v in on],
        "off": [round(v, 3) for v in off],
        "median_on": round(med_on, 3),
        "median_off": round(med_off, 3),
        "ratio_on_off": round(ratio, 4),
        "diff_pct": round(100.0 * (ratio - 1.0), 2),
        "spread_on_pct": round(spread_on, 2),
        "spread_off_pct": round(spread_off, 2),
        "spread_pct": round(spread, 2),
        "pair_ratios": [round(r, 4) for r in pair_ratios],
        "median_pair_ratio": round(statistics.median(pair_ratios), 4),
        "noisy": spread > TARGET_PCT,
        "inside_noise": abs(100.0 * (ratio - 1.0)) <= spread,
    }


def app_cpu_ms_per_job(fig: dict[str, Any], rate: float) -> float:
    """CPU milliseconds per job of the process under test (the API, or the worker): less sensitive than the
    rate to other load on the machine, which takes cores from it but does not add to its CPU time."""
    from bench.report import META_CPU_KEYS

    app_pct = sum(v for k, v in fig["cpu_pct"].items() if k not in META_CPU_KEYS)
    return 10.0 * app_pct / rate if rate else float("nan")


def side_figures(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The runs, the rate compared (met: at most 3 % lower with metrics on), and CPU per job compared."""
    for fig in runs:
        fig["app_cpu_ms_per_job"] = round(app_cpu_ms_per_job(fig, fig[key]), 3)
    rate = compare(runs, key)
    rate["met"] = rate["diff_pct"] >= -TARGET_PCT
    others = {side: [r["cpu_pct"]["others"] for r in runs if r["side"] == side] for side in ("on", "off")}
    return {
        "runs": runs,
        **rate,
        "cpu_ms_per_job": compare(runs, "app_cpu_ms_per_job"),
        "others_cpu_pct_median": {side: statistics.median(v) for side, v in others.items()},
    }


def describe(name: str, fig: dict[str, Any], unit: str) -> str:
    cpu = fig["cpu_ms_per_job"]
    verdict = (
        f"NOISY: repeats spread {fig['spread_pct']:.1f} % > the {TARGET_PCT:g} % to resolve"
        if fig["noisy"]
        else f"spread {fig['spread_pct']:.1f} %"
    )
    return (
        f"  {name}: on {fig['median_on']:,.0f} vs off {fig['median_off']:,.0f} {unit} (medians), "
        f"on/off {fig['ratio_on_off']:.3f} ({fig['diff_pct']:+.1f} %); {verdict}; CPU per job on "
        f"{cpu['median_on']:.2f} vs off {cpu['median_off']:.2f} ms ({cpu['diff_pct']:+.1f} %, spread "
        f"{cpu['spread_pct']:.1f} %)"
    )


def latency_summary(ms: list[float]) -> dict[str, Any]:
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 50), 2),
        "p95_ms": round(pct(ms, 95), 2),
        "max_ms": round(max(ms), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }
