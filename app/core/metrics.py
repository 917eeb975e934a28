"""Prometheus counters and histograms of every process: one definition per metric, labelled by report type
and (unless METRICS_TENANT_LABEL=false) tenant. Each process counts what it sees happen.

The API adds the state gauges (app/observability); workers serve theirs on METRICS_PORT (`serve`).
"""

from __future__ import annotations

import os
from datetime import datetime
from functools import lru_cache
from typing import Any, Protocol

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
    start_http_server,
)
from prometheus_client.registry import Collector

from app.core.config import get_settings

# Reports take from a few milliseconds (a cached lookup) to an hour (a full ledger).
DURATION_BUCKETS_S = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
)  # fmt: skip


class Labelled(Protocol):
    """Anything that names a report type and a tenant (a job row, a submit request)."""

    @property
    def report_type(self) -> str: ...

    @property
    def tenant(self) -> str: ...


class Metrics:
    """The metrics of one process, in a registry of its own (so tests can build a fresh one)."""

    def __init__(self, tenant_label: bool, enabled: bool = True) -> None:
        self.tenant_label = tenant_label
        self.enabled = enabled  # METRICS_ENABLED=false: nothing is counted (the bench's "off")
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self.registry = CollectorRegistry(auto_describe=True)
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)
        job = ["report_type", "tenant"] if tenant_label else ["report_type"]
        r = self.registry
        self.jobs_submitted = Counter(
            "reports_jobs_submitted", "Jobs accepted (new jobs, not idempotent repeats).", job, registry=r
        )
        self.attempts_finished = Counter(
            "reports_attempts_finished",
            "Attempts that ended, by outcome (succeeded, failed, timed_out, lost, cancelled, superseded).",
            [*job, "outcome"],
            registry=r,
        )
        self.jobs_finished = Counter(
            "reports_jobs_finished", "Jobs that reached a terminal status (done, dead, cancelled).",
            [*job, "status"], registry=r,
        )  # fmt: skip
        self.retries_scheduled = Counter(
            "reports_retries_scheduled", "Failed attempts that scheduled another attempt.", job, registry=r
        )
        self.stuck_rescued = Counter(
            "reports_stuck_jobs_rescued",
            "Running jobs whose worker went silent, declared lost by the stuck scan.",
            job,
            registry=r,
        )
        self.replays = Counter("reports_replays", "Dead or cancelled jobs replayed.", job, registry=r)
        self.alert_deliveries = Counter(
            "reports_alert_deliveries",
            "Dead letters named in alert messages, by sink and result (sent, error: retried with backoff).",
            ["sink", "result"],
            registry=r,
        )
        self.callback_deliveries = Counter(
            "reports_callback_deliveries",
            "Completion-callback tries by result (delivered, error, given_up).",
            ["result"],
            registry=r,
        )
        self.declaration_loads = Counter(
            "reports_declaration_loads",
            "Loads of REPORT_TYPES_FILE by result (ok; error: refused, the types loaded before stay).",
            ["result"],
            registry=r,
        )
        self.queue_wait = Histogram(
            "reports_queue_wait_seconds",
            "From the moment a job could start (submitted, run_at, retry due) to its attempt's start.",
            job, buckets=DURATION_BUCKETS_S, registry=r,
        )  # fmt: skip
        self.attempt_duration = Histogram(
            "reports_attempt_duration_seconds", "Run time of finished attempts.",
            job, buckets=DURATION_BUCKETS_S, registry=r,
        )  # fmt: skip
        self.job_duration = Histogram(
            "reports_job_duration_seconds", "From submit to a terminal status, by that status.",
            [*job, "status"], buckets=DURATION_BUCKETS_S, registry=r,
        )  # fmt: skip

    def job_labels(self, job: Labelled) -> tuple[str, ...]:
        return (job.report_type, job.tenant) if self.tenant_label else (job.report_type,)

    def child(self, metric: Counter | Histogram, *labels: str) -> Any:
        """`metric.labels(*labels)`, remembered: every job asks for the same few children, and `labels()`
        validates and locks on every call."""
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def register(self, collector: Collector) -> None:
        self.registry.register(collector)


@lru_cache(maxsize=1)
def get_metrics() -> Metrics:
    settings = get_settings()
    return Metrics(settings.metrics_tenant_label, settings.metrics_enabled)


def reset_metrics() -> None:
    """Start from zero with the current settings (tests)."""
    get_metrics.cache_clear()


# Set by `python -m app.serve` before it starts several API processes: their counters then live in files
# there (prometheus-client's multiprocess mode), and any one process's /metrics adds up all of them.
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"


def counters_exposition() -> bytes:
    """This process's counters and histograms in Prometheus text; under several API processes, the sum of
    every process's (the process_* and python_* series of one process would mislead there: left out)."""
    if os.environ.get(MULTIPROCESS_ENV):
        get_metrics()  # the metrics exist (at zero) before the first count, as in one process
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry)
    return generate_latest(get_metrics().registry)


def serve(port: int) -> None:
    """Serve this process's metrics on `port` (0 = off) from a background thread, for Prometheus to scrape."""
    if port:
        start_http_server(port, registry=get_metrics().registry)


def _seconds(start: datetime | None, end: datetime) -> float | None:
    return None if start is None else max(0.0, (end - start).total_seconds())


# ---- what the domains call --------------------------------------------------------------------------


def count_submitted(job: Labelled, n: int = 1) -> None:
    m = get_metrics()
    if not m.enabled:
        return
    m.jobs_submitted.labels(*m.job_labels(job)).inc(n)


def count_replay(job: Labelled) -> None:
    m = get_metrics()
    if not m.enabled:
        return
    m.replays.labels(*m.job_labels(job)).inc()


def observe_start(job: Labelled, eligible_since: datetime | None, now: datetime) -> None:
    m = get_metrics()
    waited_s = _seconds(eligible_since, now)
    if m.enabled and waited_s is not None:
        m.child(m.queue_wait, *m.job_labels(job)).observe(waited_s)


def count_attempt(job: Labelled, outcome: str, started_at: datetime | None, now: datetime) -> None:
    m = get_metrics()
    if not m.enabled:
        return
    labels = m.job_labels(job)
    m.child(m.attempts_finished, *labels, outcome).inc()
    ran_s = _seconds(started_at, now)
    if ran_s is not None:
        m.child(m.attempt_duration, *labels).observe(ran_s)


def count_retry(job: Labelled) -> None:
    m = get_metrics()
    if not m.enabled:
        return
    m.retries_scheduled.labels(*m.job_labels(job)).inc()


def count_terminal(job: Labelled, status: str, created_at: datetime | None, now: datetime) -> None:
    m = get_metrics()
    if not m.enabled:
        return
    labels = m.job_labels(job)
    m.child(m.jobs_finished, *labels, status).inc()
    took_s = _seconds(created_at, now)
    if took_s is not None:
        m.child(m.job_duration, *labels, status).observe(took_s)


def count_rescued(job: Labelled) -> None:
    m = get_metrics()
    if not m.enabled:
        return
    m.stuck_rescued.labels(*m.job_labels(job)).inc()


def count_alert(sink: str, result: str, n: int = 1) -> None:
    m = get_metrics()
    if m.enabled:
        m.alert_deliveries.labels(sink, result).inc(n)


def count_declarations_load(result: str) -> None:
    m = get_metrics()
    if m.enabled:
        m.child(m.declaration_loads, result).inc()


def count_callback(result: str) -> None:
    m = get_metrics()
    if m.enabled:
        m.callback_deliveries.labels(result).inc()
