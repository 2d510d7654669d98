"""HTTPS at a load-balanced name (docs/steering.md, HTTPS and SVCB hints): a real
`python -m dnsd serve` probing real local HTTP backends; real `dig` sees the HTTPS record's
ipv4hint and ipv6hint equal the same client's A and AAAA answers — before the primary's
backends fail their probes and after the answers have failed over to the backup pool (which
has no IPv6 backend: the ipv6hint goes with the AAAA answer)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import dns.rdata
from dns.rdtypes.svcbbase import ParamKey

from dnsd.drill.backend import DemoBackend
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess

PRIMARY4, PRIMARY6, BACKUP4 = "127.0.0.71", "::1", "127.0.0.72"


def config(ports: dict[str, int]) -> str:
    return f"""\
zone: hints.test
soa: {{mname: ns1.hints.test., rname: h.hints.test.}}
ttl: 3600
records:
  "@": {{NS: ns1.hints.test.}}
  ns1: {{A: 192.0.2.1}}
  www: {{lb: web, HTTPS: ["1 . alpn=h2,h3"]}}
monitors:
  m: {{type: http, interval: 100ms, timeout: 500ms, healthy_threshold: 1, unhealthy_threshold: 1}}
pools:
  primary:
    monitor: m
    minimum_origins: 2
    backends:
      - {{name: p4, address: {PRIMARY4}, port: {ports[PRIMARY4]}}}
      - {{name: p6, address: "{PRIMARY6}", port: {ports[PRIMARY6]}}}
  backup: {{monitor: m, backends: [{{name: b4, address: {BACKUP4}, port: {ports[BACKUP4]}}}]}}
load_balancers:
  web: {{ttl: 2, default_pools: [primary, backup]}}
"""


def dig(port: int, rtype: str) -> list[tuple[int, str]]:
    """(TTL, value) of each answer record of one real `dig` for www.hints.test."""
    out = subprocess.run(
        [
            "dig",
            "@127.0.0.1",
            "-p",
            str(port),
            "+tries=3",
            "+time=1",
            "+norec",
            "+noall",
            "+answer",
            "www.hints.test",
            rtype,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    records = []
    for line in out.splitlines():
        fields = line.split(None, 4)
        if len(fields) == 5 and fields[3] == rtype:
            records.append((int(fields[1]), fields[4]))
    return records


def hints(port: int) -> tuple[set[str], set[str], int]:
    ((ttl, text),) = dig(port, "HTTPS")
    record = dns.rdata.from_text("IN", "HTTPS", text)
    v4, v6 = (record.params.get(ParamKey.IPV4HINT), record.params.get(ParamKey.IPV6HINT))
    return (
        {str(a) for a in v4.addresses} if v4 else set(),
        {str(a) for a in v6.addresses} if v6 else set(),
        ttl,
    )


def steered(port: int) -> tuple[set[str], set[str]]:
    return {v for _, v in dig(port, "A")}, {v for _, v in dig(port, "AAAA")}


def test_https_hints_equal_the_a_and_aaaa_answers_before_and_after_a_failover(
    tmp_path: Path,
) -> None:
    loop = LoopThread()
    backends = {a: DemoBackend(a, host=a, control_port=None) for a in (PRIMARY4, PRIMARY6, BACKUP4)}
    try:
        for backend in backends.values():
            loop.call(backend.start())
        (tmp_path / "hints.yaml").write_text(config({a: b.port for a, b in backends.items()}))
        with DnsdProcess(tmp_path, "--rrl-rate", "0") as dnsd:
            deadline = time.monotonic() + 10
            while steered(dnsd.port) != ({PRIMARY4}, {PRIMARY6}):
                assert time.monotonic() < deadline, "the primary never answered"
                time.sleep(0.1)
            for _ in range(5):  # the first answers and the answer cache's agree
                v4, v6, ttl = hints(dnsd.port)
                assert (v4, v6) == steered(dnsd.port) == ({PRIMARY4}, {PRIMARY6})
                assert ttl == 2  # the load balancer's TTL, not the zone's 3600
            loop.call(backends[PRIMARY4].set_mode("503"))  # below minimum_origins: down
            deadline = time.monotonic() + 10
            while steered(dnsd.port)[0] != {BACKUP4}:
                assert time.monotonic() < deadline, "the answers never failed over"
                time.sleep(0.1)
            time.sleep(0.3)
            for _ in range(5):
                v4, v6, _ = hints(dnsd.port)
                assert (v4, v6) == steered(dnsd.port) == ({BACKUP4}, set())
            loop.call(backends[PRIMARY4].set_mode("ok"))  # failback: the hints follow
            deadline = time.monotonic() + 10
            while hints(dnsd.port)[:2] != ({PRIMARY4}, {PRIMARY6}):
                assert time.monotonic() < deadline, "the hints never failed back"
                time.sleep(0.1)
            assert steered(dnsd.port) == ({PRIMARY4}, {PRIMARY6})
    finally:
        for backend in backends.values():
            loop.call(backend.stop())
        loop.close()
