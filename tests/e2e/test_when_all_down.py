"""`when_all_down` (docs/steering.md, when all pools are down): a real `python -m dnsd serve`
probing real local HTTP backends; once every pool and the fallback fail, real `dig` sees
each rule's answer — the fallback regardless of health, NOERROR with no answer and the SOA
at the load balancer's TTL, SERVFAIL, every enabled address — and `dnsd explain`, the
`dnsd_lb_all_down` metric and the `fail_open` event name the rule that answers."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from dnsd.drill.backend import DemoBackend
from tests.admin_client import http
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess

PRIMARY, SPARE = "127.0.0.41", "127.0.0.42"


def config(primary: int, spare: int) -> str:
    lbs = {"fb": "fallback", "shut": "closed", "sf": "servfail", "every": "all"}
    records = "".join(f"  {name}: {{lb: {name}}}\n" for name in lbs)
    balancers = "".join(
        f"  {name}: {{ttl: 3, default_pools: [primary], fallback_pool: spare, "
        f"when_all_down: {rule}}}\n"
        for name, rule in lbs.items()
    )
    return f"""\
zone: down.test
soa: {{mname: ns1.down.test., rname: h.down.test., minimum: 600}}
ttl: 600
records:
  "@": {{NS: ns1.down.test.}}
  ns1: {{A: 192.0.2.1}}
{records}monitors:
  m: {{type: http, interval: 100ms, timeout: 500ms, healthy_threshold: 1, unhealthy_threshold: 1}}
pools:
  primary:
    monitor: m
    backends:
      - {{name: p1, address: {PRIMARY}, port: {primary}}}
      - {{name: p2, address: 192.0.2.77, port: {primary}, enabled: false}}
  spare: {{monitor: m, backends: [{{name: s1, address: {SPARE}, port: {spare}}}]}}
load_balancers:
{balancers}"""


def dig(port: int, name: str) -> tuple[str, list[str], list[str]]:
    """(rcode, answer values, authority records as 'owner ttl type') of one real `dig`."""
    out = subprocess.run(
        ["dig", "@127.0.0.1", "-p", str(port), "+tries=3", "+time=1", "+norec",
         "+noall", "+comments", "+answer", "+authority", f"{name}.down.test", "A"],
        capture_output=True, text=True, timeout=30,
    ).stdout  # fmt: skip
    rcode = out.split("status: ", 1)[1].split(",", 1)[0]
    section, answer, authority = "", [], []
    for line in out.splitlines():
        if line.startswith(";; ANSWER SECTION"):
            section = "answer"
        elif line.startswith(";; AUTHORITY SECTION"):
            section = "authority"
        elif line and not line.startswith(";"):
            fields = line.split()
            if section == "answer":
                answer.append(fields[-1])
            elif section == "authority":
                authority.append(f"{fields[0]} {fields[1]} {fields[3]}")
    return rcode, sorted(answer), authority


def test_every_rule_when_every_pool_and_the_fallback_fail(tmp_path: Path) -> None:
    loop = LoopThread()
    primary = DemoBackend("primary", host=PRIMARY, control_port=None)
    spare = DemoBackend("spare", host=SPARE, control_port=None)
    try:
        loop.call(primary.start())
        loop.call(spare.start())
        (tmp_path / "down.yaml").write_text(config(primary.port, spare.port))
        with DnsdProcess(tmp_path) as dnsd:
            deadline = time.monotonic() + 10
            while dig(dnsd.port, "shut")[1] != [PRIMARY]:
                assert time.monotonic() < deadline, "the primary never answered"
                time.sleep(0.1)
            for name in ("fb", "sf", "every"):  # healthy: no rule applies
                assert dig(dnsd.port, name) == ("NOERROR", [PRIMARY], []), name
            loop.call(primary.set_mode("503"))
            loop.call(spare.set_mode("503"))
            deadline = time.monotonic() + 10
            while dig(dnsd.port, "shut")[1]:
                assert time.monotonic() < deadline, "the pools never went down"
                time.sleep(0.1)
            time.sleep(0.5)  # both verdicts in (threshold 1, interval 100 ms)
            for _ in range(3):  # the first answer and the answer cache's agree
                assert dig(dnsd.port, "fb") == ("NOERROR", [SPARE], [])
                assert dig(dnsd.port, "shut") == ("NOERROR", [], ["down.test. 3 SOA"])
                assert dig(dnsd.port, "sf") == ("SERVFAIL", [], [])
                # every enabled address, health ignored (p2 is disabled)
                assert dig(dnsd.port, "every") == ("NOERROR", [PRIMARY, SPARE], [])
            _, metrics = http(dnsd.admin_port, "GET", "/metrics")
            for lb, rule in (("fb", "fallback"), ("shut", "closed"), ("sf", "servfail"),
                             ("every", "all")):  # fmt: skip
                assert f'dnsd_lb_all_down{{lb="{lb}",rule="{rule}"}} 1.0' in metrics, metrics
                # dnsd_fallback_answers counts the fallback pool's answers, not the rules'
                counted = f'dnsd_fallback_answers_total{{lb="{lb}"}}' in metrics
                assert counted is (rule == "fallback"), (lb, metrics)
            _, events = http(dnsd.admin_port, "GET", "/api/v1/events?kind=fail_open")
            opened = {e["lb"]: set(e["when_all_down"].values()) for e in events["events"]}
            assert opened == {"fb": {"fallback"}, "shut": {"closed"}, "sf": {"servfail"},
                              "every": {"all"}}, events  # fmt: skip
            _, status = http(dnsd.admin_port, "GET", "/api/v1/status?lb=shut")
            [shut] = status["load_balancers"]
            assert set(shut["all_down"].values()) == {"closed"} and shut["all_down"], shut
            explained = subprocess.run(
                [sys.executable, "-m", "dnsd", "explain", "shut.down.test", "--server",
                 f"http://127.0.0.1:{dnsd.admin_port}"],
                capture_output=True, text=True, timeout=30,
            ).stdout  # fmt: skip
            assert "all down: when_all_down closed answers" in explained, explained
            assert "when_all_down closed: NOERROR with no answer" in explained, explained
            loop.call(spare.set_mode("ok"))  # the fallback back: it answers, no rule
            deadline = time.monotonic() + 10
            while dig(dnsd.port, "sf")[0] != "NOERROR":
                assert time.monotonic() < deadline, "the spare never came back"
                time.sleep(0.1)
            for name in ("shut", "sf", "every"):
                assert dig(dnsd.port, name) == ("NOERROR", [SPARE], []), name
            deadline = time.monotonic() + 10
            while " 1.0" in "".join(
                line
                for line in http(dnsd.admin_port, "GET", "/metrics")[1].splitlines()
                if line.startswith("dnsd_lb_all_down{")
            ):  # the metric follows within its refresh
                assert time.monotonic() < deadline, "dnsd_lb_all_down stayed 1"
                time.sleep(0.2)
    finally:
        loop.call(primary.stop())
        loop.call(spare.stop())
        loop.close()


SECOND = "127.0.0.43"


def last_good_config(ports: dict[str, int]) -> str:
    return f"""\
zone: down.test
soa: {{mname: ns1.down.test., rname: h.down.test., minimum: 600}}
records:
  "@": {{NS: ns1.down.test.}}
  ns1: {{A: 192.0.2.1}}
  lg: {{lb: lg}}
monitors:
  m: {{type: http, interval: 100ms, timeout: 500ms, healthy_threshold: 1, unhealthy_threshold: 1}}
pools:
  primary: {{monitor: m, backends: [{{name: p1, address: {PRIMARY}, port: {ports[PRIMARY]}}}]}}
  second: {{monitor: m, backends: [{{name: s1, address: {SECOND}, port: {ports[SECOND]}}}]}}
  spare: {{monitor: m, backends: [{{name: f1, address: {SPARE}, port: {ports[SPARE]}}}]}}
load_balancers:
  lg: {{ttl: 3, default_pools: [primary, second], fallback_pool: spare, when_all_down: last_good}}
"""


ALL_DOWN = 'dnsd_lb_all_down{lb="lg",rule="last_good"} 1.0'


def wait_metric(admin_port: int, line: str) -> None:
    deadline = time.monotonic() + 10
    while line not in http(admin_port, "GET", "/metrics")[1]:
        assert time.monotonic() < deadline, f"no {line}"
        time.sleep(0.1)


def wait_answer(port: int, expected: list[str]) -> None:
    deadline = time.monotonic() + 10
    while (got := dig(port, "lg")) != ("NOERROR", expected, []):
        assert time.monotonic() < deadline, got
        time.sleep(0.1)


def test_last_good_answers_what_was_given_last_and_survives_a_restart(tmp_path: Path) -> None:
    loop = LoopThread()
    backends = {host: DemoBackend(host, host=host, control_port=None)
                for host in (PRIMARY, SECOND, SPARE)}  # fmt: skip
    config_dir, state = tmp_path / "config", tmp_path / "state"
    config_dir.mkdir()
    try:
        for backend in backends.values():
            loop.call(backend.start())
        ports = {host: b.port for host, b in backends.items()}
        (config_dir / "down.yaml").write_text(last_good_config(ports))
        with DnsdProcess(config_dir, "--state-dir", str(state)) as dnsd:
            wait_answer(dnsd.port, [PRIMARY])
            loop.call(backends[PRIMARY].set_mode("503"))
            wait_answer(dnsd.port, [SECOND])  # failed over: the answer given now
            loop.call(backends[SPARE].set_mode("503"))  # the fallback (idle) down first
            wait_metric(dnsd.admin_port, 'dnsd_backend_up{backend="f1",pool="spare"} 0.0')
            loop.call(backends[SECOND].set_mode("503"))  # then nothing healthy
            wait_metric(dnsd.admin_port, ALL_DOWN)
            for _ in range(3):  # `fallback` would answer SPARE
                assert dig(dnsd.port, "lg") == ("NOERROR", [SECOND], [])
        saved = (state / "last_good.json").read_text()
        assert SECOND in saved and PRIMARY not in saved, saved
        # A restart with everything still down: the answer comes back from STATE_DIR.
        with DnsdProcess(config_dir, "--state-dir", str(state)) as dnsd:
            wait_metric(dnsd.admin_port, ALL_DOWN)
            for _ in range(3):
                assert dig(dnsd.port, "lg") == ("NOERROR", [SECOND], [])
            loop.call(backends[PRIMARY].set_mode("ok"))  # healthy again: steering, no rule
            wait_answer(dnsd.port, [PRIMARY])
        assert PRIMARY in (state / "last_good.json").read_text()  # the new last answer kept
    finally:
        for backend in backends.values():
            loop.call(backend.stop())
        loop.close()
