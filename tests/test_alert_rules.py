"""The alerting rules and the Grafana dashboard that ship in docs/: promtool (Debian
`prometheus`, installed by `make deps`) checks the rules and runs their unit tests, and the
dashboard is a dashboard. That every metric they read exists is checked against a real
server in tests/integration/test_metric_names.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).parent.parent
RULES = ROOT / "docs" / "prometheus" / "dnsd-alerts.yaml"
RULE_TESTS = ROOT / "docs" / "prometheus" / "dnsd-alerts.test.yaml"
DASHBOARD = ROOT / "docs" / "grafana" / "dnsd.json"
METRIC = re.compile(r"\bdnsd_[a-z0-9_]+")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    assert binary, "promtool is installed by `make deps` (Debian package prometheus)"
    return subprocess.run(
        [binary, *args], capture_output=True, text=True, timeout=120, cwd=RULES.parent
    )


def test_promtool_checks_the_rules() -> None:
    done = promtool("check", "rules", RULES.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 14 rules found" in done.stdout


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    done = promtool("test", "rules", RULE_TESTS.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_has_a_unit_test_that_fires_it() -> None:
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    fired = {
        case["alertname"]
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
        if case.get("exp_alerts")
    }
    assert alerts == fired


def test_a_broken_rule_is_caught(tmp_path: Path) -> None:
    """The check above can fail: promtool refuses a rule that does not parse."""
    broken = RULES.read_text().replace("dnsd_backend_probed_up == 0", "dnsd_backend_probed_up ==")
    (tmp_path / "broken.yaml").write_text(broken)
    binary = shutil.which("promtool")
    assert binary
    done = subprocess.run(
        [binary, "check", "rules", str(tmp_path / "broken.yaml")], capture_output=True, text=True
    )
    assert done.returncode != 0


def rule_metrics() -> set[str]:
    return set(METRIC.findall(RULES.read_text()))


def dashboard_metrics() -> set[str]:
    """Every dnsd_ name in a panel's or a variable's query."""
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in board["templating"]["list"] if "definition" in v]
    return {name for expr in exprs for name in METRIC.findall(expr)}


def test_the_dashboard_is_complete() -> None:
    board = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)) and board["uid"] and board["title"] == "dnsd"
    for p in board["panels"]:
        for target in p.get("targets", []):
            assert METRIC.search(target["expr"]), (p["title"], target)
    # The cockpit: what answers now, failovers, overrides, build, GeoIP age.
    assert {
        "dnsd_lb_active_pool", "dnsd_lb_failed_over", "dnsd_lb_failed_over_by_health",
        "dnsd_failovers_total",
        "dnsd_overrides_active", "dnsd_build_info", "dnsd_geoip_build_timestamp_seconds",
        "dnsd_probe_rtt_seconds",
    } <= dashboard_metrics()  # fmt: skip
