"""The outage budget (docs/steering.md): TTL + interval × unhealthy_threshold + timeout per
load-balanced name, the max over every pool it can answer from (nested load balancers
included), printed by `dnsd check` and `explain`; `max_outage` turns a larger one into an
error. One pure function computes it for check, explain and the drills."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dnsd.config.loader import load_config
from dnsd.config.outage import detect_s, outage_budget, worst_case_s
from dnsd.drill.config import Timing
from dnsd.drill.plan import MonitorTiming


@pytest.mark.parametrize(
    ("ttl", "interval", "threshold", "timeout", "expected"),
    [
        (30, 5.0, 3, 2.0, 47.0),  # docs/configuration.md's example monitor, TTL 30 s
        (0, 15.0, 3, 5.0, 50.0),  # the defaults, TTL 0: detection alone
        (60, 1.0, 1, 0.5, 61.5),  # one failure is enough
        (300, 10.0, 5, 9.0, 359.0),
        (2, 0.5, 2, 0.4, 3.4),  # the drill's timing
    ],
)
def test_worst_case_is_ttl_plus_interval_times_threshold_plus_timeout(
    ttl, interval, threshold, timeout, expected
) -> None:
    assert worst_case_s(ttl, interval, threshold, timeout) == pytest.approx(expected)
    assert detect_s(interval, threshold, timeout) == pytest.approx(expected - ttl)


def test_the_drills_bounds_are_the_same_formula() -> None:
    """Drills quote the same bound `dnsd check` prints (no second formula)."""
    t = Timing(ttl_s=7, interval_s=1.5, timeout_s=0.7, unhealthy_threshold=4)
    assert t.bound_s == pytest.approx(worst_case_s(7, 1.5, 4, 0.7))
    m = MonitorTiming(interval_s=1.5, timeout_s=0.7, healthy_threshold=2, unhealthy_threshold=4)
    assert m.detect_s + 7 == pytest.approx(t.bound_s)


HEADER = """\
zone: t.test
soa: {mname: ns1.t.test., rname: h.t.test.}
records:
  "@": {NS: ns1.t.test.}
  ns1: {A: 192.0.2.1}
  www: {lb: web}
"""
MONITORS = """\
monitors:
  fast: {type: tcp, interval: 2s, timeout: 1s, unhealthy_threshold: 2}
  slow: {type: tcp, interval: 10s, timeout: 4s, retries: 3, unhealthy_threshold: 3}
  own: {type: tcp, interval: 20s, timeout: 3s, unhealthy_threshold: 2}
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "z.yaml").write_text(textwrap.dedent(text))
    return tmp_path


def budget_of(tmp_path: Path, pools_and_lbs: str, lb: str = "web"):
    config, _ = load_config(write(tmp_path, HEADER + MONITORS + pools_and_lbs))
    return outage_budget(config, lb)


CASES = [
    # (what, pools and load balancers, seconds, slowest pool, monitor, unprobed)
    ("one pool", """\
pools:
  a: {monitor: fast, backends: [{name: a1, address: 192.0.2.10}]}
load_balancers:
  web: {ttl: 30, default_pools: [a]}
""", 30 + 2 * 2 + 1, "a", "fast", ()),
    ("max over the pools, fallback included; retries add nothing", """\
pools:
  a: {monitor: fast, backends: [{name: a1, address: 192.0.2.10}]}
  b: {monitor: slow, backends: [{name: b1, address: 192.0.2.11}]}
load_balancers:
  web: {ttl: 10, default_pools: [a], fallback_pool: b}
""", 10 + 10 * 3 + 4, "b", "slow", ()),
    ("a nested load balancer's pools count, with the outer TTL", """\
pools:
  a: {monitor: fast, backends: [{name: a1, address: 192.0.2.10}]}
  b: {monitor: slow, backends: [{name: b1, address: 192.0.2.11}]}
load_balancers:
  web: {ttl: 5, default_pools: ["lb:inner"]}
  inner: {ttl: 300, default_pools: [a], region_pools: {WEU: [b]}}
""", 5 + 10 * 3 + 4, "b", "slow", ()),
    ("a backend's own monitor overrides the pool's", """\
pools:
  a: {monitor: fast, backends: [{name: a1, address: 192.0.2.10},
                                {name: a2, address: 192.0.2.12, monitor: own}]}
load_balancers:
  web: {ttl: 30, default_pools: [a]}
""", 30 + 20 * 2 + 3, "a", "own", ()),
    ("an unmonitored pool is listed apart", """\
pools:
  a: {monitor: fast, backends: [{name: a1, address: 192.0.2.10}]}
  sorry: {backends: [{name: s1, address: 192.0.2.13}]}
load_balancers:
  web: {ttl: 30, default_pools: [a], fallback_pool: sorry}
""", 30 + 2 * 2 + 1, "a", "fast", ("sorry",)),
    ("nothing probed: no number", """\
pools:
  sorry: {backends: [{name: s1, address: 192.0.2.13}]}
load_balancers:
  web: {ttl: 30, default_pools: [sorry]}
""", None, None, None, ("sorry",)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("what", "text", "seconds", "pool", "monitor", "unprobed"), CASES, ids=[c[0] for c in CASES]
)
def test_budget_per_load_balancer(tmp_path, what, text, seconds, pool, monitor, unprobed) -> None:
    budget = budget_of(tmp_path, text)
    assert budget.seconds == (pytest.approx(seconds) if seconds is not None else None), what
    assert (budget.pool, budget.monitor, budget.unprobed) == (pool, monitor, unprobed)
    if seconds is None:
        assert budget.text() == "no probes: an outage is never detected"


def check(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dnsd", "check", str(directory)], capture_output=True, text=True
    )


LB = """\
pools:
  a: {monitor: slow, backends: [{name: a1, address: 192.0.2.10}]}
load_balancers:
  web:
    ttl: 30
    default_pools: [a]
"""


def test_dnsd_check_prints_each_names_worst_case(tmp_path) -> None:
    proc = check(write(tmp_path, HEADER + "  api: {lb: web}\n" + MONITORS + LB))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    expected = "64s = TTL 30s + 10s × 3 + timeout 4s (monitor slow, pool a)"
    assert f"api.t.test. (lb web): outage budget {expected}" in lines, proc.stdout
    assert f"www.t.test. (lb web): outage budget {expected}" in lines, proc.stdout


def test_max_outage_below_the_worst_case_is_an_error(tmp_path) -> None:
    text = HEADER + MONITORS + LB + "    max_outage: 1m\n"
    directory = write(tmp_path, text)
    proc = check(directory)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = text.splitlines().index("    max_outage: 1m") + 1  # file:line: path: what
    assert (
        f"{directory / 'z.yaml'}:{line}: load_balancers.web.max_outage: the worst-case outage 64s "
        "(TTL 30s + 10s × 3 + timeout 4s (monitor slow, pool a)) is above max_outage 60s"
    ) in proc.stderr, proc.stderr
    assert "1 error(s)" in proc.stderr


def test_max_outage_at_or_above_the_worst_case_passes(tmp_path) -> None:
    proc = check(write(tmp_path, HEADER + MONITORS + LB + "    max_outage: 64s\n"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "max_outage 64s" in proc.stdout and "EXCEEDED" not in proc.stdout


def test_max_outage_without_probes_is_an_error(tmp_path) -> None:
    text = (
        HEADER
        + """\
pools:
  a: {backends: [{name: a1, address: 192.0.2.10}]}
load_balancers:
  web: {default_pools: [a], max_outage: 60s}
"""
    )
    proc = check(write(tmp_path, text))
    assert proc.returncode == 1
    assert "load_balancers.web.max_outage: max_outage 60s cannot hold" in proc.stderr
    assert "no probes: an outage is never detected" in proc.stderr


def test_a_malformed_max_outage_is_an_error(tmp_path) -> None:
    text = HEADER + MONITORS + LB + "    max_outage: soon\n"
    proc = check(write(tmp_path, text))
    assert proc.returncode == 1
    line = len(text.splitlines())
    assert f"z.yaml:{line}: load_balancers.web.max_outage: expected a duration" in proc.stderr


def test_dnsd_explain_shows_the_budget(tmp_path) -> None:
    directory = write(tmp_path, HEADER + MONITORS + LB + "    max_outage: 2m\n")
    base = [sys.executable, "-m", "dnsd", "explain", "www.t.test", "--dir", str(directory)]
    text = subprocess.run(base, capture_output=True, text=True, check=True).stdout
    assert (
        "outage:   worst case behind a cache 64s = TTL 30s + 10s × 3 + timeout 4s "
        "(monitor slow, pool a); max_outage 120s"
    ) in text.splitlines(), text
    info = json.loads(
        subprocess.run([*base, "--json"], capture_output=True, text=True, check=True).stdout
    )
    assert info["outage_budget"]["seconds"] == 64
    assert info["outage_budget"]["exceeded"] is False
