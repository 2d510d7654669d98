"""`dnsd drill run` with a plan that expects a ramp (docs/drills.md, "Expecting a ramp"): a
real `python -m dnsd serve` (response rate limiting on, as it ships: the drill asks with a
DNS cookie), real HTTP backends, a real unbound, and the drill run as a user runs it.

`web` has `ramp: {duration: 5s, steps: 4}` and TTL 1: draining its primary with an override
and restoring it are both moves away from a healthy pool, so both ramp, and the drill sees
the shares rise 25 %, 50 %, 75 %, 100 %. A primary that fails for real is left at once (an
unhealthy pool is never ramped): a plan expecting a ramp there fails, exit 1, saying so. A
plan expecting a ramp of `plain`, which has none, does not fit the config: exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dnsd.drill.backend import DemoBackend
from dnsd.drill.control import DemoBackends
from dnsd.drill.resolver import Unbound
from tests.admin_client import http
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess

TOKEN = "ramp-drill-token"
PRIMARY, BACKUP = "127.0.0.91", "127.0.0.92"
STEPS, DURATION_S = 4, 5.0


def config(ports: dict[str, int]) -> str:
    return f"""\
zone: ramp.test
soa: {{mname: ns1.ramp.test., rname: h.ramp.test., minimum: 1}}
records:
  "@": {{NS: ns1.ramp.test.}}
  ns1: {{A: 192.0.2.1}}
  www: {{lb: web}}
  plain: {{lb: plain}}
monitors:
  m: {{type: http, interval: 0.2s, timeout: 0.3s, healthy_threshold: 1, unhealthy_threshold: 1}}
pools:
  primary: {{monitor: m, backends: [{{name: p1, address: {PRIMARY}, port: {ports["p1"]}}}]}}
  backup: {{monitor: m, backends: [{{name: b1, address: {BACKUP}, port: {ports["b1"]}}}]}}
load_balancers:
  web: {{ttl: 1, default_pools: [primary, backup], ramp: {{duration: {DURATION_S:g}s, steps: {STEPS}}}}}
  plain: {{ttl: 1, default_pools: [primary, backup]}}
"""


@dataclass
class Setup:
    dnsd: DnsdProcess
    unbound: Unbound
    control: int

    def plan(self, tmp_path: Path, name: str, steps: str) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(
            f"name: {name}\nserver: http://127.0.0.1:{self.dnsd.admin_port}\n"
            f"dns: 127.0.0.1:{self.dnsd.port}\nresolvers: [127.0.0.1:{self.unbound.port}]\n"
            f"steps:\n{steps}"
        )
        return path

    def drill(self, plan: Path, *args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "dnsd", "drill", "run", str(plan), *args]
        env = dict(os.environ, DNSD_ADMIN_TOKEN=TOKEN)
        return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)

    def mode_command(self, tmp_path: Path, mode: str) -> str:
        """A real fault: a script that switches the primary's health answer."""
        script = tmp_path / f"primary-{mode}.py"
        script.write_text(
            "import urllib.request\n"
            f"urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:{self.control}"
            f"/backends/p1', data=b'{{\"mode\": \"{mode}\"}}', method='POST'), timeout=5)\n"
        )
        return f"{sys.executable} {script}"

    def ramps_in_force(self) -> list[dict]:
        _, status = http(self.dnsd.admin_port, "GET", "/api/v1/status?lb=web", token=TOKEN)
        return status["load_balancers"][0]["ramp"]["in_force"]

    def settle(self) -> None:
        """Wait until no ramp is in force and the primary answers (a test's own ramp back)."""
        deadline = time.monotonic() + DURATION_S + 10
        while self.ramps_in_force() or self.overrides():
            assert time.monotonic() < deadline, self.ramps_in_force()
            time.sleep(0.2)

    def overrides(self) -> list[dict]:
        status, listed = http(self.dnsd.admin_port, "GET", "/api/v1/overrides", token=TOKEN)
        assert status == 200, listed
        return listed["overrides"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    loop = LoopThread()
    group = DemoBackends()

    async def start() -> None:
        for name, address in (("p1", PRIMARY), ("b1", BACKUP)):
            group.backends[name] = await DemoBackend(name, host=address, control_port=None).start()

    loop.call(start())
    control = loop.call(group.serve_control("127.0.0.1", 0))
    base = tmp_path_factory.mktemp("ramp")
    (base / "zones").mkdir()
    (base / "zones" / "ramp.yaml").write_text(config(group.ports))
    dnsd = DnsdProcess(base / "zones", env={"DNSD_ADMIN_TOKEN": TOKEN})
    dnsd.__enter__()
    unbound = loop.call(Unbound("ramp.test", dnsd.port).start())
    try:
        yield Setup(dnsd, unbound, control)
    finally:
        unbound.stop()
        dnsd.stop()
        loop.call(group.stop())
        loop.close()


RAMPS = """\
  - name: drain the primary
    fault: {pool: primary}
    expect: [{name: www.ramp.test, ramp: backup}]
  - restore: true
    expect: [{name: www.ramp.test, ramp: primary}]
"""


def test_a_drained_and_restored_primary_ramps_in_steps_and_the_drill_shows_them(
    setup: Setup, tmp_path: Path
) -> None:
    plan = setup.plan(tmp_path, "ramped", RAMPS)
    result = setup.drill(plan, "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "ramp of web: 4 steps over 5s, shares 25% 50% 75% 100% to backup, judged at dnsd "
        "(320 queries/s); through resolvers all by the ramp's end + TTL 1s + 1s"
    ) in result.stdout
    out, junit, report = tmp_path / "r.json", tmp_path / "junit.xml", tmp_path / "r.html"
    result = setup.drill(plan, "--json", str(out), "--junit", str(junit), "--report", str(report))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2/2 expectations held: PASS" in result.stdout
    for text in (result.stdout, junit.read_text(), report.read_text()):
        assert "shares from backup per step at dnsd: " in text
        assert "(expected 25% 50% 75% 100%; " in text
    data = json.loads(out.read_text())
    for step, pool in zip(data["steps"], ("backup", "primary"), strict=True):
        [e] = step["expectations"]
        assert e["passed"] and e["lost"] == 0, e
        assert set(e["lanes"]) == {"dnsd", f"resolver 127.0.0.1:{setup.unbound.port}"}
        ramp = e["ramp"]
        assert (ramp["pool"], ramp["steps"], ramp["duration_s"]) == (pool, STEPS, DURATION_S)
        assert ramp["started_s"] <= e["bound_s"] + 1.0
        shares = [s["measured_share"] for s in ramp["shares"]]
        assert [s["expected_share"] for s in ramp["shares"]] == [0.25, 0.5, 0.75, 1.0]
        assert all(s["answers"] >= 100 for s in ramp["shares"]), ramp  # cookies: no RRL
        assert shares == sorted(shares) and shares[0] < 0.5 and shares[-1] == 1.0, shares
        assert all(s < 1.0 for s in shares[:-1]), shares  # never all at once
        print(f"ramp to {pool}: shares {shares}, answers", [s["answers"] for s in ramp["shares"]])
    assert setup.overrides() == []


def test_a_ramp_expected_where_the_answers_move_at_once_fails_with_exit_1(
    setup: Setup, tmp_path: Path
) -> None:
    setup.settle()
    down, up = setup.mode_command(tmp_path, "503"), setup.mode_command(tmp_path, "ok")
    steps = f"""\
  - name: the primary fails for real
    fault: {{command: "{down}", restore: "{up}"}}
    expect: [{{name: www.ramp.test, ramp: backup}}]
"""
    out = tmp_path / "r.json"
    result = setup.drill(setup.plan(tmp_path, "at-once", steps), "--json", str(out))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "0/1 expectations held: FAIL" in result.stdout
    assert "failed: www.ramp.test from here -> ramp to pool backup within bound" in result.stdout
    assert "dnsd: step 1 of 4: " in result.stdout
    assert "answers from backup: every answer already, not 25%: not ramped" in result.stdout
    [e] = json.loads(out.read_text())["steps"][0]["expectations"]
    assert e["ramp"]["shares"][0]["measured_share"] == 1.0 and not e["passed"]
    setup.settle()


def test_a_ramp_expected_of_a_load_balancer_without_one_is_refused_with_exit_2(
    setup: Setup, tmp_path: Path
) -> None:
    steps = """\
  - fault: {pool: primary}
    expect: [{name: plain.ramp.test, ramp: backup}]
"""
    plan = setup.plan(tmp_path, "no-ramp", steps)
    for args in (("--dry-run",), ()):
        result = setup.drill(plan, *args)
        assert result.returncode == 2, result.stdout + result.stderr
        assert (
            f"{plan}:7: steps[0].expect[0].ramp: load balancer 'plain' (plain.ramp.test) has "
            "no ramp: its answers move at once (give it ramp: {duration, steps}, "
            "docs/steering.md)"
        ) in result.stderr
        assert "nothing was changed" in result.stderr
    assert setup.overrides() == []
