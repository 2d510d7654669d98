"""Disaster-recovery tests: every drill scenario end to end through unbound, run once as a
user runs them (`dnsd drill all`) and judged scenario by scenario from its JSON report."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from dnsd.drill.config import DEFAULT_TIMING
from dnsd.drill.ports import free_port_pair
from dnsd.drill.runner import SCENARIOS


@pytest.fixture(scope="module")
def drilled(tmp_path_factory) -> dict[str, Any]:
    """Every scenario once, as a user runs them: `dnsd drill all` in its box (demo
    backends, dnsd, unbound), with a JSON report and a picture per scenario."""
    out = tmp_path_factory.mktemp("drill-all")
    plots = out / "plots"
    drill = subprocess.run(
        [sys.executable, "-m", "dnsd", "drill", "all", "--plot", str(plots), "--quiet",
         "--json", str(out / "all.json")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    results = json.loads((out / "all.json").read_text())
    return {"drill": drill, "plots": plots, "results": {r["scenario"]: r for r in results}}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario_passes_through_unbound_with_no_lost_queries(drilled, scenario: str) -> None:
    result = drilled["results"][scenario]
    assert result["lost"] == 0
    assert result["passed"], {k: v for k, v in result["checks"].items() if not v}
    lanes = {answer["lane"] for answer in result["timeline"]}
    assert "resolver" in lanes or scenario == "trickle"


def test_every_scenario_passing_exits_0(drilled) -> None:
    drill = drilled["drill"]
    assert drill.returncode == 0, drill.stdout + drill.stderr[-2000:]


def test_primary_down_meets_the_outage_bound(drilled) -> None:
    t = DEFAULT_TIMING
    result = drilled["results"]["primary-down"]
    detect_s, client_s = result["detect_s"], result["client_s"]
    assert detect_s is not None and client_s is not None
    assert client_s <= t.ttl_s + t.interval_s * t.unhealthy_threshold + t.timeout_s + 1.0
    assert client_s >= detect_s  # the resolver never moves before dnsd does
    assert detect_s <= t.interval_s * t.unhealthy_threshold + t.timeout_s + 0.5


def test_plot_with_all_draws_one_picture_per_scenario(drilled) -> None:
    """`dnsd drill all --plot DIR` writes DIR/SCENARIO.png for every scenario (it used to
    draw only the first, silently)."""
    plots = drilled["plots"]
    assert sorted(p.name for p in plots.iterdir()) == sorted(f"{s}.png" for s in SCENARIOS)
    pictures = {p.read_bytes() for p in plots.iterdir()}
    assert len(pictures) == len(SCENARIOS)  # each its own scenario, not one copied
    assert all(p[:8] == b"\x89PNG\r\n\x1a\n" for p in pictures)


def test_drill_against_dnsd_demo_as_a_user_runs_it(tmp_path) -> None:
    dns, admin, control = free_port_pair(), free_port_pair(), free_port_pair()
    demo = subprocess.Popen(
        [sys.executable, "-m", "dnsd", "demo", "--listen", f"127.0.0.1:{dns}",
         "--admin", f"127.0.0.1:{admin}", "--control", f"127.0.0.1:{control}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        banner = ""
        deadline = time.monotonic() + 30
        while "Try:" not in banner:
            assert time.monotonic() < deadline and demo.poll() is None, banner
            banner += demo.stdout.readline()  # type: ignore[union-attr]
        dig = subprocess.run(["dig", "@127.0.0.1", "-p", str(dns), "+short", "www.demo.test"],
                             capture_output=True, text=True, timeout=10)  # fmt: skip
        assert sorted(dig.stdout.split()) == ["127.0.0.11", "127.0.0.12"]
        out, plot = tmp_path / "out.json", tmp_path / "out.png"
        drill = subprocess.run(
            [sys.executable, "-m", "dnsd", "drill", "primary-down", "--server", f"http://127.0.0.1:{admin}",
             "--control", f"http://127.0.0.1:{control}", "--dns", f"127.0.0.1:{dns}",
             "--json", str(out), "--plot", str(plot)],
            capture_output=True, text=True, timeout=120, env=dict(os.environ, DNSD_ADMIN_TOKEN="demo"),
        )  # fmt: skip
        assert drill.returncode == 0, drill.stdout + drill.stderr
        assert "primary-down" in drill.stdout and "PASS" in drill.stdout
        data = json.loads(out.read_text())
        for key in ("scenario", "ttl_s", "interval_s", "unhealthy_threshold", "bound_s", "detect_s",
                    "client_s", "failback_s", "queries", "lost", "passed"):  # fmt: skip
            assert key in data
        assert data["passed"] and data["lost"] == 0
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 20_000
    finally:
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=15) == 0


def test_unbound_takes_another_port_when_its_first_is_taken(monkeypatch) -> None:
    """A port free when checked can be taken before unbound binds it: unbound exits, the
    drill tries another port. The first port here is held by a TCP listener."""
    import socket

    from dnsd.drill import resolver
    from tests.conftest import DATA
    from tests.processes import DnsdProcess

    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    ports = iter([taken.getsockname()[1]])
    monkeypatch.setattr(resolver, "free_port_pair", lambda: next(ports, None) or free_port_pair())
    try:
        with DnsdProcess(DATA / "good") as dnsd:
            unbound = resolver.Unbound("example.test.", dnsd.port)
            try:
                asyncio.run(unbound.start())
                assert unbound.port not in (0, taken.getsockname()[1])
                out = subprocess.run(
                    ["dig", "@127.0.0.1", "-p", str(unbound.port), "+tcp", "mail.example.test"],
                    capture_output=True, text=True, timeout=10,
                ).stdout  # fmt: skip
                assert "192.0.2.25" in out
            finally:
                unbound.stop()
    finally:
        taken.close()
