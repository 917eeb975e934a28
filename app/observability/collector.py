"""The state snapshot as Prometheus gauges, in the text format: `reports_jobs{status,…}` and the rest.

Built per scrape in a registry of its own and appended to the process's counters (no family repeats).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.core.config import get_settings
from app.observability.service import StateSnapshot

# Every kind is reported, at 0 when none is live, so an alert on `== 0` needs no absent() guard.
PROCESS_KINDS = ("worker", "dead_letter", "scheduler")


class StateCollector(Collector):
    def __init__(self, snap: StateSnapshot, tenant_label: bool) -> None:
        self.snap = snap
        self.tenant_label = tenant_label

    def collect(self) -> Iterable[Metric]:
        snap = self.snap
        up = GaugeMetricFamily(
            "reports_state_up", "1 when the last read of MySQL and Redis for these gauges worked."
        )
        up.add_metric([], 1.0 if snap.ok else 0.0)
        yield up
        interval = GaugeMetricFamily(
            "reports_scheduler_interval_seconds",
            "The scheduler's configured tick interval (SCAN_INTERVAL_S).",
        )
        interval.add_metric([], get_settings().scan_interval_s)
        yield interval
        if not snap.ok:
            return
        yield from self._jobs()
        age = GaugeMetricFamily(
            "reports_oldest_eligible_job_age_seconds",
            "How long the longest-waiting job that could start now has waited (0 when none waits).",
        )
        age.add_metric([], snap.oldest_eligible_age_s)
        yield age
        letters = GaugeMetricFamily(
            "reports_dead_letters_open", "Dead letters neither replayed nor archived."
        )
        letters.add_metric([], snap.dead_letters_open)
        yield letters
        alerts = GaugeMetricFamily(
            "reports_alert_deliveries_pending",
            "Dead-letter alerts not yet accepted, by sink.",
            labels=["sink"],
        )
        for sink, n in sorted(snap.alerts_pending.items()):
            alerts.add_metric([sink], n)
        yield alerts
        callbacks = GaugeMetricFamily("reports_callbacks_pending", "Completion callbacks not yet delivered.")
        callbacks.add_metric([], snap.callbacks_pending)
        yield callbacks
        workers = GaugeMetricFamily(
            "reports_workers_live", "Processes that announced themselves recently, by kind.", labels=["kind"]
        )
        for kind in PROCESS_KINDS:
            workers.add_metric([kind], snap.workers_live.get(kind, 0))
        yield workers
        tick = GaugeMetricFamily(
            "reports_scheduler_last_tick_age_seconds",
            "Seconds since any scheduler last finished a tick (+Inf if none ever did).",
        )
        tick.add_metric([], snap.scheduler_tick_age_s)
        yield tick
        lengths = GaugeMetricFamily(
            "reports_queue_length", "Messages in Redis (due or deferred), by queue.", labels=["queue"]
        )
        for name, n in sorted(snap.queue_lengths.items()):
            lengths.add_metric([name], n)
        yield lengths

    def _jobs(self) -> Iterable[Metric]:
        labels = ["status", "report_type", "tenant"] if self.tenant_label else ["status", "report_type"]
        jobs = GaugeMetricFamily(
            "reports_jobs",
            "Jobs in a live status (pending, scheduled, retrying, running); finished ones are counted by "
            "reports_jobs_finished_total.",
            labels=labels,
        )
        counts: dict[tuple[str, ...], int] = {}
        for row in self.snap.live_jobs:
            key = (row.status, row.report_type, row.tenant)[: len(labels)]
            counts[key] = counts.get(key, 0) + row.count
        for key, n in sorted(counts.items()):
            jobs.add_metric(list(key), n)
        yield jobs


class _Rendered:
    """The last snapshot rendered: a cached scrape reuses its text instead of rebuilding every series."""

    snap: StateSnapshot | None = None
    tenant_label = True
    body = b""


def exposition(snap: StateSnapshot) -> bytes:
    tenant_label = get_settings().metrics_tenant_label
    if _Rendered.snap is snap and _Rendered.tenant_label == tenant_label:
        return _Rendered.body
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StateCollector(snap, tenant_label))
    body = generate_latest(registry)
    _Rendered.snap, _Rendered.tenant_label, _Rendered.body = snap, tenant_label, body
    return body
