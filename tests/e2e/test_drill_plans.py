"""`dnsd drill run PLAN.yaml` on a setup that shares nothing with the demo:
`api.acme.test` (a failover LB) and `geo.acme.test` (a geo LB) over pools `fra`/`iad` of
real HTTP backends, a real unbound passing the vantage points' subnets on (ECS), and the
drill run as a user runs it (`python -m dnsd drill run ...`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dnsd.drill.backend import DemoBackend
from dnsd.drill.control import DemoBackends
from dnsd.drill.resolver import Unbound
from tests.admin_client import http
from tests.dnsclient import ask
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess

TOKEN = "acme-drill-token"
BACKENDS = {"fra-1": "127.0.0.71", "fra-2": "127.0.0.72", "iad-1": "127.0.0.81", "iad-2": "127.0.0.82"}  # fmt: skip


def acme_config(ports: dict[str, int]) -> str:
    def pool(name: str) -> str:
        return "\n".join(
            f"      - {{name: {b}, address: {a}, port: {ports[b]}}}"
            for b, a in BACKENDS.items()
            if b.startswith(name)
        )

    return f"""\
zone: acme.test
ttl: 300
soa: {{mname: ns1.acme.test., rname: ops.acme.test., minimum: 2}}
records:
  "@": {{NS: ns1.acme.test.}}
  ns1: {{A: 127.0.0.1}}
  api: {{lb: api-failover}}
  geo: {{lb: api-geo}}
  steady: {{lb: api-trickle}}
monitors:
  http-health:
    type: http
    path: /health
    interval: 0.5s
    timeout: 0.4s
    healthy_threshold: 2
    unhealthy_threshold: 2
pools:
  fra:
    monitor: http-health
    region: WEU
    backends:
{pool("fra")}
  iad:
    monitor: http-health
    region: ENAM
    backends:
{pool("iad")}
client_networks:
  85.214.0.0/24: {{region: WEU}}
  8.8.8.0/24: {{region: ENAM}}
load_balancers:
  api-failover:
    ttl: 2
    default_pools: [fra, iad]
    max_answers: 2
  api-geo:
    ttl: 2
    steering: geo
    default_pools: [iad]
    region_pools: {{WEU: [fra, iad], ENAM: [iad, fra]}}
    max_answers: 2
  api-trickle:                          # fra answers, one answer in ten goes to iad
    ttl: 2
    default_pools: [fra, iad]
    trickle_ratio: 0.1
    max_answers: 2
"""


@dataclass
class Acme:
    dnsd: DnsdProcess
    unbound: Unbound
    backends: DemoBackends
    loop: LoopThread
    control: int
    state: Path

    def plan(self, tmp_path: Path, steps: str, name: str = "acme.yaml", extra: str = "") -> Path:
        path = tmp_path / name
        path.write_text(
            f"""\
name: acme eu outage rehearsal
server: http://127.0.0.1:{self.dnsd.admin_port}
dns: 127.0.0.1:{self.dnsd.port}
resolvers: [127.0.0.1:{self.unbound.port}]
vantage: {{eu: 85.214.0.0/24, us: 8.8.8.0/24}}
{extra}steps:
{steps}"""
        )
        return path

    def drill(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "dnsd", "drill", "run", *args],
            capture_output=True, text=True, timeout=timeout,
            env=dict(os.environ, DNSD_ADMIN_TOKEN=TOKEN),
        )  # fmt: skip

    def mode_script(self, tmp_path: Path, pool: str, mode: str) -> str:
        """A real fault: a script that switches the pool's backends' health answer."""
        script = tmp_path / f"{pool}-{mode}.sh"
        script.write_text("set -e\n" + "".join(
            f"curl -sf -o /dev/null -X POST -d '{{\"mode\": \"{mode}\"}}' "
            f"http://127.0.0.1:{self.control}/backends/{b}\n"
            for b in BACKENDS
            if b.startswith(pool)
        ))  # fmt: skip
        return f"sh {script}"


@pytest.fixture(scope="module")
def acme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Acme]:
    loop = LoopThread()
    group = DemoBackends()

    async def start() -> None:
        for name, address in BACKENDS.items():
            group.backends[name] = await DemoBackend(name, host=address, control_port=None).start()

    loop.call(start())
    control = loop.call(group.serve_control("127.0.0.1", 0))
    base = tmp_path_factory.mktemp("acme")
    (base / "zones").mkdir()
    (base / "zones" / "acme.yaml").write_text(acme_config(group.ports))
    state = base / "state"
    dnsd = DnsdProcess(base / "zones", "--state-dir", str(state), env={"DNSD_ADMIN_TOKEN": TOKEN})
    dnsd.__enter__()
    unbound = loop.call(Unbound("acme.test", dnsd.port, client_subnet=True).start())
    try:
        yield Acme(dnsd, unbound, group, loop, control, state)
    finally:
        unbound.stop()
        dnsd.stop()
        loop.call(group.stop())
        loop.close()


GOOD_STEPS = """\
  - fault: {pool: fra}
    expect:
      - {name: api.acme.test, from: eu, pool: iad, within: bound}
      - {name: geo.acme.test, from: eu, pool: iad, within: bound}
  - restore: true
    expect:
      - {name: api.acme.test, from: eu, pool: fra, within: failback_bound}
      - {name: geo.acme.test, from: eu, pool: fra, within: failback_bound}
  - fault: {backend: iad/iad-1}
    expect: [{name: geo.acme.test, from: us, pool: iad, within: bound}]
  - restore: true
    expect: [{name: geo.acme.test, from: us, backend: iad/iad-1, within: failback_bound}]
  - name: manual failover
    fault: {trickle: {lb: api-failover, ratio: 1.0}}
    expect: [{name: api.acme.test, from: us, pool: iad, within: bound}]
  - restore: true
    expect: [{name: api.acme.test, from: us, pool: fra, within: failback_bound}]
  - name: fra's health checks fail for real
    fault: {command: "DOWN", restore: "UP"}
    expect: [{name: geo.acme.test, from: eu, pool: iad, within: bound}]
  - restore: true
    expect: [{name: geo.acme.test, from: eu, pool: fra, within: failback_bound}]
"""


def test_a_plan_with_pool_backend_trickle_and_command_faults_passes(acme: Acme, tmp_path) -> None:
    steps = GOOD_STEPS.replace("DOWN", acme.mode_script(tmp_path, "fra", "503"))
    plan = acme.plan(tmp_path, steps.replace("UP", acme.mode_script(tmp_path, "fra", "ok")))
    out = tmp_path / "out"
    out.mkdir()
    result = acme.drill(
        str(plan), "--json", str(out / "r.json"), "--junit", str(out / "junit.xml"),
        "--report", str(out / "report.html"), "--plot", str(out / "plots"),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "10/10 expectations held: PASS" in result.stdout
    data = json.loads((out / "r.json").read_text())
    assert data["passed"] and len(data["steps"]) == 8
    for step in data["steps"]:
        for e in step["expectations"]:
            assert e["passed"] and e["lost"] == 0
            assert set(e) >= {"bound_s", "ttl_s", "interval_s", "detect_s", "client_s",
                              "failback_s", "queries", "passed"}  # the drills' keys  # fmt: skip
            assert e["ttl_s"] == 2 and e["interval_s"] == 0.5 and e["queries"] > 0
            # measured at dnsd and through unbound, both within the computed bound
            assert set(e["lanes"]) == {"dnsd", f"resolver 127.0.0.1:{acme.unbound.port}"}
            assert e["client_s"] <= e["bound_s"] + 1.0
    first = data["steps"][0]["expectations"][0]
    assert first["bound_s"] == pytest.approx(0.5 * 2 + 0.4 + 2)  # interval × 2 + timeout + TTL
    assert first["bound"] == "0.5s × 2 + 0.4s + TTL 2s"
    suite = ET.parse(out / "junit.xml").getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "10" and suite.get("failures") == "0"
    assert len(suite.findall("testcase")) == 10 and not suite.findall(".//failure")
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 8 and "fault: {pool: fra}" in html
    assert sorted(p.name for p in (out / "plots").iterdir()) == [
        f"step-{i:02d}.png" for i in range(1, 9)
    ]
    # every fault is gone: no override left, answers back where they started
    assert _overrides(acme) == []


def test_an_expectation_that_cannot_hold_fails_with_exit_1_and_is_named(
    acme: Acme, tmp_path
) -> None:
    plan = acme.plan(
        tmp_path,
        """\
  - fault: {pool: fra}
    expect:
      - {name: api.acme.test, from: eu, pool: iad, within: bound}
      - {name: api.acme.test, from: us, pool: fra, within: 1s}
  - restore: true
""",
    )
    junit = tmp_path / "junit.xml"
    result = acme.drill(str(plan), "--junit", str(junit))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "failed: api.acme.test from us -> pool fra within 1s (line 10)" in result.stdout
    assert "1/2 expectations held: FAIL" in result.stdout
    suite = ET.parse(junit).getroot()
    [failure] = suite.findall("testcase/failure")
    assert "api.acme.test from us -> pool fra" in failure.get("message", "")
    assert _overrides(acme) == []  # restored although the plan failed


def test_one_stray_trickle_answer_does_not_meet_an_expectation_a_holding_one_does(
    acme: Acme, tmp_path
) -> None:
    """`steady` answers from fra with a 10% trickle to iad. Nothing moves it, so "iad
    within 10s" must fail although ~10 of its ~100 answers at dnsd come from iad (each one met
    it before); when a manual failover moves every answer, the same expectation holds, at
    dnsd and through unbound."""
    stray = tmp_path / "stray.yaml"
    stray.write_text(f"""\
name: stray trickle
server: http://127.0.0.1:{acme.dnsd.admin_port}
dns: 127.0.0.1:{acme.dnsd.port}
steps:
  - name: nothing moves it
    expect: [{{name: steady.acme.test, pool: iad, within: 10s}}]
""")
    result = acme.drill(str(stray), "--json", str(tmp_path / "stray.json"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "0/1 expectations held: FAIL" in result.stdout
    [e] = json.loads((tmp_path / "stray.json").read_text())["steps"][0]["expectations"]
    assert not e["passed"] and e["lanes"] == {"dnsd": None}
    assert "never held (" in e["message"] and "followed by 1s of answers that did" in e["message"]
    strays = int(e["message"].split("never held (")[1].split(" of ")[0])
    assert strays > 0, "no trickle answer came: the test proves nothing"
    holding = acme.plan(
        tmp_path,
        """\
  - name: manual failover
    fault: {trickle: {lb: api-trickle, ratio: 1.0}}
    expect: [{name: steady.acme.test, pool: iad, within: bound}]
  - restore: true
""",
        name="holding.yaml",
    )
    result = acme.drill(str(holding), "--json", str(tmp_path / "holding.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    [e] = json.loads((tmp_path / "holding.json").read_text())["steps"][0]["expectations"]
    assert e["passed"] and len(e["lanes"]) == 2 and e["client_s"] <= e["bound_s"] + 1.0
    assert _overrides(acme) == []


def test_dry_run_on_a_missing_pool_exits_2_with_file_line_and_a_suggestion(
    acme: Acme, tmp_path
) -> None:
    plan = acme.plan(
        tmp_path,
        """\
  - fault: {pool: fr}
    expect: [{name: api.acme.test, from: eu, pool: iad}]
""",
    )
    result = acme.drill(str(plan), "--dry-run")
    assert result.returncode == 2
    assert f"{plan}:7: steps[0].fault.pool: no pool 'fr' in the running config" in result.stderr
    assert 'did you mean "fra"?' in result.stderr
    # a good plan: what would happen, with the bounds, and nothing changed
    good = acme.plan(tmp_path, GOOD_STEPS.split("  - fault: {backend")[0], name="good.yaml")
    result = acme.drill(str(good), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "bound 3.40s = 0.5s × 2 + 0.4s + TTL 2s" in result.stdout
    assert "fra within failback_bound: bound 3.40s = 0.5s × 2 + 0.4s + TTL 2s" in result.stdout
    assert _overrides(acme) == []
    # a plan that is wrong on its own: unknown key with a hint, unknown vantage point
    bad = acme.plan(tmp_path, "  - fault: {pool: fra}\n    expekt: []\n", name="bad.yaml")
    result = acme.drill(str(bad), "--dry-run")
    assert result.returncode == 2 and f"{bad}:8: steps[0].expekt: unknown key" in result.stderr
    assert 'did you mean "expect"?' in result.stderr


def test_sigkill_mid_fault_the_override_expires_by_itself_and_answers_return(
    acme: Acme, tmp_path
) -> None:
    plan = acme.plan(
        tmp_path,
        """\
  - fault: {pool: fra}
    expect: [{name: api.acme.test, from: eu, pool: fra, within: 60s}]
""",
        extra="fault_for: 3s\n",
    )
    drill = subprocess.Popen(
        [sys.executable, "-m", "dnsd", "drill", "run", str(plan)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, DNSD_ADMIN_TOKEN=TOKEN),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while _answer(acme) != {"127.0.0.81", "127.0.0.82"}:  # the fault is in
            assert time.monotonic() < deadline and drill.poll() is None
            time.sleep(0.1)
        drill.send_signal(signal.SIGKILL)
        drill.wait(timeout=10)
        [override] = _overrides(acme)
        assert override["target"] == "fra" and override["expires"]
        assert override["reason"] == "dnsd drill: acme eu outage rehearsal"
        killed = time.monotonic()
        while _answer(acme) != {"127.0.0.71", "127.0.0.72"}:
            assert time.monotonic() - killed < 6.0, "the override did not expire"
            time.sleep(0.1)
        assert _overrides(acme) == []
    finally:
        if drill.poll() is None:
            drill.kill()


def test_sigterm_mid_fault_restores_at_once(acme: Acme, tmp_path) -> None:
    plan = acme.plan(
        tmp_path,
        """\
  - fault: {pool: fra}
    expect: [{name: api.acme.test, from: eu, pool: fra, within: 60s}]
""",
    )
    drill = subprocess.Popen(
        [sys.executable, "-m", "dnsd", "drill", "run", str(plan)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, DNSD_ADMIN_TOKEN=TOKEN),
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while _answer(acme) != {"127.0.0.81", "127.0.0.82"}:
        assert time.monotonic() < deadline and drill.poll() is None
        time.sleep(0.1)
    drill.send_signal(signal.SIGTERM)
    out, err = drill.communicate(timeout=20)
    assert drill.returncode == 1, out + err
    assert "interrupted by SIGTERM: every fault was restored" in out
    assert _answer(acme) == {"127.0.0.71", "127.0.0.72"}
    assert _overrides(acme) == []


def _answer(acme: Acme) -> set[str]:
    return {str(rr.rdata) for rr in ask(acme.dnsd.port, "api.acme.test").rr}


def _overrides(acme: Acme) -> list[dict]:
    status, listed = http(acme.dnsd.admin_port, "GET", "/api/v1/overrides", token=TOKEN)
    assert status == 200, listed
    return listed["overrides"]
