"""The multi-region lab: real network namespaces, one dnsd node, demo backends
and an unbound per region, redis-server in its own namespace. `dnsd lab drill all` runs
the scenarios, twice in a row, and leaves nothing behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dnsd.lab.lab import leftovers
from dnsd.lab.netns import available
from dnsd.lab.topology import TOKEN

BUILT = ["partial-outage", "dynamic-rtt", "node-down", "redis-partition", "region-isolated",
         "region-down", "redis-failover"]  # fmt: skip
KEYS = {"scenario", "ttl_s", "interval_s", "unhealthy_threshold", "bound_s", "detect_s",
        "client_s", "failback_s", "queries", "lost", "passed"}  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def namespaces_here():
    why = available()
    assert why is None, f"the lab needs network namespaces (root, iproute2): {why}"
    yield
    subprocess.run([sys.executable, "-m", "dnsd", "lab", "down"], timeout=60)


@pytest.mark.parametrize("run", [1, 2])
def test_lab_drills_pass_and_leave_nothing_behind(tmp_path: Path, run: int) -> None:
    out = tmp_path / "lab.json"
    done = subprocess.run(
        [sys.executable, "-m", "dnsd", "lab", "drill", "all", "--json", str(out), "--plot", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    print(done.stdout)
    results = json.loads(out.read_text())
    assert [r["scenario"] for r in results] == BUILT, done.stderr
    for result in results:
        assert set(result) >= KEYS, result["scenario"]
        assert result["passed"], (result["scenario"], result["checks"], result["notes"])
        assert (tmp_path / f"{result['scenario']}.png").stat().st_size > 0
    partial = results[0]
    # a real 1 of 3 and 2 of 3: each node sees the sources differ by region
    assert partial["checks"]["each node sees ENAM's source unhealthy, the others healthy"]
    assert partial["client_s"] <= partial["bound_s"]
    dynamic = results[1]
    assert dynamic["checks"]["explain's RTTs within 20% of the path delays"]
    assert done.returncode == 0, done.stderr[-2000:]
    assert leftovers() == [], "lab namespaces or processes left behind"


def test_the_lab_drill_plan_in_docs_passes(tmp_path: Path) -> None:
    """docs/drills/lab.yaml, run as its comment says: from WNAM's namespace."""
    plan = Path(__file__).parent.parent.parent / "docs" / "drills" / "lab.yaml"
    up = subprocess.run([sys.executable, "-m", "dnsd", "lab", "up"], capture_output=True,
                        text=True, timeout=300)  # fmt: skip
    assert up.returncode == 0, up.stderr[-2000:]
    try:
        junit = tmp_path / "lab-drill.xml"
        done = subprocess.run(
            ["ip", "netns", "exec", "dnsdlab-wnam", sys.executable, "-m", "dnsd", "drill", "run",
             str(plan), "--server", "http://10.77.1.10:8053", "--junit", str(junit), "--quiet"],
            capture_output=True, text=True, timeout=300,
            env=dict(os.environ, DNSD_ADMIN_TOKEN=TOKEN),
        )  # fmt: skip
        print(done.stdout)
        assert done.returncode == 0, done.stdout + done.stderr[-2000:]
        suite = ET.parse(junit).getroot()
        assert suite.get("tests") == "8" and suite.get("failures") == "0"
    finally:
        subprocess.run([sys.executable, "-m", "dnsd", "lab", "down"], timeout=120)
    assert leftovers() == [], "lab namespaces or processes left behind"
