"""The alerting rules and the Grafana dashboard in docs/ read only metrics a real `dnsd serve`
exports: scraped from one with a Redis health bus (real redis-server) and the GeoIP
database, so a renamed metric breaks this test, not somebody's pager."""

from __future__ import annotations

import re
from pathlib import Path

from tests.admin_client import http
from tests.builders import primary_standby_zone
from tests.processes import DnsdProcess, Redis
from tests.test_alert_rules import dashboard_metrics, rule_metrics

ROOT = Path(__file__).parent.parent.parent
SCRAPED = re.compile(r"^(?:# (?:HELP|TYPE) )?(dnsd_[a-zA-Z0-9_]+)", flags=re.M)
LINK = re.compile(r"GET (/api/v1/[^\s]*[^\s.,)])")
CONFIG = primary_standby_zone("names.test")


def test_every_metric_the_rules_and_the_dashboard_read_is_exported(tmp_path: Path) -> None:
    (tmp_path / "names.yaml").write_text(CONFIG)
    redis = Redis().start()
    try:
        args = ("--redis", f"redis://127.0.0.1:{redis.port}/0", "--redis-insecure",
                "--node", "n1", "--pop-region", "WEU")  # fmt: skip
        with DnsdProcess(tmp_path, *args) as dnsd:
            dnsd.wait_for_log("connected: sharing health")
            status, text = http(dnsd.admin_port, "GET", "/metrics")
            # Every admin API address the alerts send the on-call to exists and takes its query
            # (no 400 or 404; a read route may want a token: 401/403).
            links = set(
                LINK.findall((ROOT / "docs" / "prometheus" / "dnsd-alerts.yaml").read_text())
            )
            answers = {link: http(dnsd.admin_port, "GET", link)[0] for link in links}
    finally:
        redis.kill()
    assert status == 200
    assert len(links) >= 2 and all(code in (200, 401, 403) for code in answers.values()), answers
    exported = set(SCRAPED.findall(text))
    wanted = rule_metrics() | dashboard_metrics()
    assert len(wanted) >= 25
    missing = wanted - exported
    assert not missing, f"the rules or the dashboard read metrics dnsd does not export: {missing}"
