"""The capacity waterfall (docs/steering.md, capacity waterfall): a real `python -m dnsd
serve` probing real local HTTP backends, asked 300 times a second over real UDP from one
client (one region) for a name whose first pool has `capacity: 100`. Within 15 s about
100 answers a second (±25 %) come from that pool and the rest from the next one; the
status and `dnsd_pool_load_ratio` say how full it is."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

from dnsd.drill.backend import DemoBackend
from tests.admin_client import http
from tests.dnsclient import make_query
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess

FIRST, NEXT = "127.0.0.71", "127.0.0.72"
RATE, TICK_S, RUN_S, SETTLED_S = 300, 0.1, 20.0, 15.0


def config(first: int, then: int) -> str:
    return f"""\
zone: fall.test
soa: {{mname: ns1.fall.test., rname: h.fall.test., minimum: 600}}
records:
  "@": {{NS: ns1.fall.test.}}
  ns1: {{A: 192.0.2.1}}
  www: {{lb: web}}
monitors:
  m: {{type: http, interval: 1s, timeout: 500ms, healthy_threshold: 1, unhealthy_threshold: 2}}
pools:
  first: {{monitor: m, capacity: 100, backends: [{{name: f1, address: {FIRST}, port: {first}}}]}}
  next: {{monitor: m, backends: [{{name: n1, address: {NEXT}, port: {then}}}]}}
load_balancers:
  web: {{ttl: 1, default_pools: [first, next], overflow: waterfall}}
"""


def ask_steadily(port: int) -> list[tuple[float, str]]:
    """RATE queries a second for RUN_S seconds, paced by the clock; (time, address) of each
    answer, time counted from the first query."""
    wire = bytearray(make_query("www.fall.test", rd=False).pack())
    answers, per_tick, ident = [], int(RATE * TICK_S), 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("127.0.0.1", port))
        s.settimeout(1.0)
        start = time.monotonic()
        tick = 0
        while (now := time.monotonic() - start) < RUN_S:
            sent = set()
            for _ in range(per_tick):
                ident = (ident + 1) & 0xFFFF
                struct.pack_into("!H", wire, 0, ident)
                sent.add(ident)
                s.send(wire)
            while sent:
                try:
                    reply = s.recv(512)
                except TimeoutError:
                    break
                got = int.from_bytes(reply[:2], "big")  # no EDNS: the address is last
                if got in sent and reply[6:8] == b"\x00\x01":
                    sent.discard(got)
                    answers.append((now, socket.inet_ntoa(reply[-4:])))
            tick += 1
            time.sleep(max(0.0, start + tick * TICK_S - time.monotonic()))
    return answers


def test_a_full_pool_spills_its_excess_to_the_next(tmp_path: Path) -> None:
    loop = LoopThread()
    first = DemoBackend("first", host=FIRST, control_port=None)
    then = DemoBackend("next", host=NEXT, control_port=None)
    try:
        loop.call(first.start())
        loop.call(then.start())
        (tmp_path / "fall.yaml").write_text(config(first.port, then.port))
        # 300 answers a second to one client: response rate limiting off for this test
        with DnsdProcess(tmp_path, "--rrl-rate", "0") as dnsd:
            deadline = time.monotonic() + 15
            while (
                http(dnsd.admin_port, "GET", "/api/v1/status?pool=first")[1]["pools"][0][
                    "backends"
                ][0]["probed"]
                != "healthy"
            ):
                assert time.monotonic() < deadline, "the first pool never became healthy"
                time.sleep(0.1)
            answers = ask_steadily(dnsd.port)
            _, status = http(dnsd.admin_port, "GET", "/api/v1/status?pool=first")
            _, metrics = http(dnsd.admin_port, "GET", "/metrics")
        settled = [address for at, address in answers if at >= SETTLED_S]
        seconds = RUN_S - SETTLED_S
        first_rate, next_rate = settled.count(FIRST) / seconds, settled.count(NEXT) / seconds
        print(f"after {SETTLED_S:g} s: first {first_rate:.0f}/s, next {next_rate:.0f}/s")
        assert len(settled) >= 0.9 * RATE * seconds, len(settled)
        assert 75 <= first_rate <= 125, (first_rate, next_rate)
        assert next_rate >= 0.9 * (RATE - 125), (first_rate, next_rate)
        load = status["pools"][0]["load"]
        assert load["capacity"] == 100 and 0.75 <= load["ratio"] <= 1.25, load
        [line] = [
            x for x in metrics.splitlines() if x.startswith('dnsd_pool_load_ratio{pool="first"}')
        ]
        assert 0.75 <= float(line.split()[-1]) <= 1.25, line
    finally:
        loop.call(first.stop())
        loop.call(then.stop())
        loop.close()
