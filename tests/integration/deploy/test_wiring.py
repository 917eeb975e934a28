"""The shipped dashboard, alert rules and compose profile fit the app: every metric they query is one the app
exposes, the dashboard is well-formed Grafana JSON, and compose wires Prometheus and Grafana to the services.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.core.metrics import Metrics
from app.core.times import utcnow
from app.observability.collector import StateCollector
from app.observability.service import StateSnapshot

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "report-orchestrator.json"

# Series Prometheus itself makes: scrape health, and the firing alerts the dashboard annotates.
PROMETHEUS_SERIES = {"up", "ALERTS"}

# Words of PromQL that look like names but are not metrics.
PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "by", "without", "on", "ignoring"}


def exposed_names() -> set[str]:
    """Every series name the app's processes can expose: the counters and histograms of app.core.metrics
    (with their suffixes) and the API's state gauges (app.observability.collector)."""
    families = list(Metrics(tenant_label=True).registry.collect())
    families += StateCollector(StateSnapshot(ok=True, taken_at=utcnow()), tenant_label=True).collect()
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "summary": ("_sum", "_count", "_created"),
        "gauge": ("",),
    }
    names: set[str] = set()
    for family in families:
        names |= {family.name + suffix for suffix in suffixes.get(family.type, ("",))}
        names |= {sample.name for sample in family.samples}
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects. Not a parser, but enough for our queries: drop strings,
    label matchers, ranges and grouping clauses, then keep the identifiers that are not function calls."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", " ", expr)
    expr = re.sub(r"\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = re.findall(r"(?<![\w.$])([A-Za-z_:][\w:]*)(?!\w)(?!\s*\()", expr)
    return {name for name in names if name.lower() not in PROMQL_KEYWORDS}


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def dashboard_exprs() -> list[str]:
    board = dashboard()
    exprs = [target["expr"] for panel in board["panels"] for target in panel.get("targets", [])]
    return exprs + [a["expr"] for a in board["annotations"]["list"] if a.get("expr")]


def rule_exprs() -> list[str]:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def test_metric_name_extraction() -> None:
    expr = (
        "histogram_quantile(0.95, sum by (le, report_type) "
        '(rate(reports_queue_wait_seconds_bucket{report_type=~"a|b"}[$__rate_interval]))) '
        "> 3 * max(reports_scheduler_interval_seconds) unless on() "
        'sum(up{job="api"} offset 5m) or vector(0) and sum(foo_total) by (tenant)'
    )
    assert metric_names(expr) == {
        "reports_queue_wait_seconds_bucket",
        "reports_scheduler_interval_seconds",
        "up",
        "foo_total",
    }


def test_exposed_names_cover_counters_histograms_and_gauges() -> None:
    names = exposed_names()
    assert {
        "reports_jobs_finished_total",
        "reports_queue_wait_seconds_bucket",
        "reports_jobs",
        "reports_scheduler_last_tick_age_seconds",
        "reports_state_up",
    } <= names


@pytest.mark.parametrize("source", ["dashboard", "alert rules"])
def test_queries_only_use_metrics_the_app_exposes(source: str) -> None:
    exprs = dashboard_exprs() if source == "dashboard" else rule_exprs()
    known = exposed_names() | PROMETHEUS_SERIES
    used = set().union(*(metric_names(expr) for expr in exprs))
    assert used, source
    assert used - known == set(), f"{source} queries metrics nobody exposes"


def test_queries_do_not_depend_on_the_tenant_label() -> None:
    """METRICS_TENANT_LABEL=false drops `tenant`: no query may group or filter by it."""
    for expr in dashboard_exprs() + rule_exprs():
        assert "tenant" not in expr, expr


def test_dashboard_shows_what_operators_need() -> None:
    used = set().union(*(metric_names(expr) for expr in dashboard_exprs()))
    assert {
        "reports_jobs_finished_total",  # throughput
        "reports_attempts_finished_total",  # failure ratio
        "reports_queue_wait_seconds_bucket",  # queue wait p50/p95/p99
        "reports_attempt_duration_seconds_bucket",
        "reports_jobs",
        "reports_oldest_eligible_job_age_seconds",
        "reports_dead_letters_open",
        "reports_alert_deliveries_total",
        "reports_alert_deliveries_pending",
        "reports_callback_deliveries_total",
        "reports_callbacks_pending",
        "reports_workers_live",
        "reports_scheduler_last_tick_age_seconds",
        "reports_scheduler_interval_seconds",
        "reports_queue_length",
    } <= used
    quantiles = [e for e in dashboard_exprs() if "reports_queue_wait_seconds_bucket" in e]
    for q in ("0.5", "0.95", "0.99"):
        assert any(e.startswith(f"histogram_quantile({q}, sum by (le, report_type)") for e in quantiles), q


def test_dashboard_is_well_formed_grafana_json() -> None:
    board = dashboard()
    assert board["uid"] == "report-orchestrator"
    assert board["title"]
    assert 36 <= board["schemaVersion"] <= 41
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["report_type"]["allValue"] == ".*"
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert ref_ids and len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in panel["targets"]:
            assert target["expr"].strip(), panel["title"]


def test_grafana_provisioning_points_at_the_dashboard_and_prometheus() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    grafana = compose["services"]["grafana"]
    mounts = dict(volume.split(":")[:2] for volume in grafana["volumes"] if volume.startswith("./"))
    for host in mounts:
        assert (ROOT / host).exists(), host
    dashboards_dir = mounts["./deploy/grafana/dashboards"]
    providers = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/dashboards.yml").read_text())
    assert [p["options"]["path"] for p in providers["providers"]] == [dashboards_dir]
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{dashboards_dir}/{DASHBOARD.name}"
    datasources = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())
    (source,) = datasources["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"


def test_compose_observability_profile() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    for name in ("prometheus", "grafana"):
        assert services[name]["profiles"] == ["observability"], name
    for name in ("mysql", "redis", "migrate", "api", "worker", "dead-letter", "scheduler"):
        assert "profiles" not in services[name], f"{name} must start without a profile"
    assert "9090:9090" in services["prometheus"]["ports"]
    assert "3000:3000" in services["grafana"]["ports"]
    assert "./deploy/prometheus:/etc/prometheus:ro" in services["prometheus"]["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in services["prometheus"]["command"]

    # What Prometheus scrapes is what the services serve: METRICS_PORT on the arq processes and the
    # scheduler (the shared environment kept), the API's HTTP port.
    scrape = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text())
    for job in scrape["scrape_configs"]:
        (sd,) = job["dns_sd_configs"]
        (service_name,) = sd["names"]
        service = services[service_name]
        if service_name == "api":
            assert "--port" in service["command"]
            assert str(sd["port"]) == service["command"][service["command"].index("--port") + 1]
        else:
            env = service["environment"]
            assert env["METRICS_PORT"] == str(sd["port"]), service_name
            assert env["DATABASE_URL"] == services["api"]["environment"]["DATABASE_URL"], service_name
