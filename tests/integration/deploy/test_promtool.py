"""promtool on the shipped Prometheus files: the alert rules are valid and their unit tests pass, the scrape
config loads (with its rule file), and every PromQL query of the Grafana dashboard parses.

promtool comes from Debian's `prometheus` package, which `make system-deps` installs; without it these tests
fail (they do not skip), since `make test` always provides it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "report-orchestrator.json"

# Grafana's variables, replaced by what Grafana would put there, so the query is plain PromQL.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "1m", "$report_type": ".*"}


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail(
            "promtool is missing: `make system-deps` installs it (Debian package `prometheus`), or "
            "`apt-get install -y --no-install-recommends prometheus` with a policy-rc.d that exits 101"
        )
    return path


def run(promtool: str, *args: str, cwd: Path = PROMETHEUS_DIR) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_alert_rules_are_valid(promtool: str) -> None:
    result = run(promtool, "check", "rules", "alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_alert_rules_unit_tests_pass(promtool: str) -> None:
    result = run(promtool, "test", "rules", "alerts_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_alert_rules_unit_tests_run_from_any_directory(promtool: str, tmp_path: Path) -> None:
    """The test file names its rule file relative to itself, as Prometheus resolves it."""
    result = run(promtool, "test", "rules", str(PROMETHEUS_DIR / "alerts_test.yml"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_unit_test_and_the_promised_labels() -> None:
    rules = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())
    alerts = {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule}
    assert {
        "ReportsSchedulerSilent",
        "ReportsNoLiveWorkers",
        "ReportsOldestEligibleJobTooOld",
        "ReportsAlertDeliveriesFailing",
    } <= alerts.keys()
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in {"critical", "warning"}, name
        assert {"summary", "description"} <= rule["annotations"].keys(), name
    tests = yaml.safe_load((PROMETHEUS_DIR / "alerts_test.yml").read_text())
    firing = {
        case["alertname"]
        for test in tests["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    quiet = {
        case["alertname"]
        for test in tests["tests"]
        for case in test.get("alert_rule_test", [])
        if not case.get("exp_alerts")
    }
    assert firing == alerts.keys(), "every alert needs a case where it fires"
    assert quiet == alerts.keys(), "every alert needs a case where it stays quiet"


def test_scrape_config_is_valid_with_its_rule_file(promtool: str, tmp_path: Path) -> None:
    # rule_files are relative to the config file, so the check passes from any working directory.
    for cwd in (PROMETHEUS_DIR, ROOT, tmp_path):
        result = run(promtool, "check", "config", str(PROMETHEUS_DIR / "prometheus.yml"), cwd=cwd)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "1 rule files found" in result.stdout, result.stdout


def test_scrape_config_scrapes_every_process() -> None:
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs.keys() == {"api", "worker", "dead-letter", "scheduler"}
    assert jobs["api"]["scrape_interval"] == "5s"
    assert config["rule_files"] == ["alerts.yml"]
    for name, job in jobs.items():
        assert job.get("metrics_path", "/metrics") == "/metrics"
        (sd,) = job["dns_sd_configs"]
        assert sd["type"] == "A" and sd["names"] == [name]
        assert sd["port"] == (8000 if name == "api" else 9100)


def dashboard_queries() -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and annotation query, Grafana variables substituted."""
    dashboard = json.loads(DASHBOARD.read_text())
    found = [
        (f"panel {panel['id']} {target['refId']}", target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]
    found += [
        (f"annotation {a['name']}", a["expr"]) for a in dashboard["annotations"]["list"] if a.get("expr")
    ]
    out = []
    for where, expr in found:
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, f"{where}: unknown Grafana variable in {expr!r}"
        out.append((where, expr))
    return out


def test_dashboard_queries_are_valid_promql(promtool: str, tmp_path: Path) -> None:
    """Each query becomes a recording rule of a throwaway rule file, which promtool parses."""
    queries = dashboard_queries()
    assert len(queries) > 20
    rules = [
        {"record": "dashboard_query:" + re.sub(r"\W", "_", where), "expr": expr} for where, expr in queries
    ]
    path = tmp_path / "dashboard_queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = run(promtool, "check", "rules", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout
