"""Ramps (docs/steering.md, ramps): a real `python -m dnsd serve` probing real local HTTP
backends. The primary fails: every answer leaves it within the detection bound, at once
(leaving an unhealthy pool is never ramped). It recovers: with `ramp: {duration: 10s,
steps: 5}` and TTL 1 its share rises 20 %, 40 %, 60 %, 80 %, 100 % in 2 s windows from the
ramp's start, each window's share judged over ≥ 2,000 real UDP answers by a binomial 99.9 %
interval (and ±10 points); status, the metric, the event and `dnsd explain` show the step
in force."""

from __future__ import annotations

import math
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from dnslib import DNSRecord

from dnsd.drill.backend import DemoBackend
from tests.admin_client import http
from tests.dnsclient import make_query
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess

PRIMARY, BACKUP = "127.0.0.61", "127.0.0.62"
INTERVAL_S, TIMEOUT_S, UNHEALTHY_THRESHOLD = 0.1, 0.5, 1
STEP_S, STEPS = 2.0, 5
BURST, PAUSE_S = 24, 0.01  # up to about 2,000 queries a second: ≥ 2,000 answers per step
EDGE_S = 0.05  # answers this close to a step boundary are not judged (either step holds)
Z999 = 3.2905


def config(primary: int, backup: int) -> str:
    return f"""\
zone: ramp.test
soa: {{mname: ns1.ramp.test., rname: h.ramp.test., minimum: 600}}
records:
  "@": {{NS: ns1.ramp.test.}}
  ns1: {{A: 192.0.2.1}}
  www: {{lb: web}}
monitors:
  m: {{type: http, interval: {INTERVAL_S}s, timeout: {TIMEOUT_S}s, healthy_threshold: 1,
       unhealthy_threshold: {UNHEALTHY_THRESHOLD}}}
pools:
  primary: {{monitor: m, backends: [{{name: p1, address: {PRIMARY}, port: {primary}}}]}}
  backup: {{monitor: m, backends: [{{name: b1, address: {BACKUP}, port: {backup}}}]}}
load_balancers:
  web: {{ttl: 1, default_pools: [primary, backup], ramp: {{duration: 10s, steps: {STEPS}}}}}
"""


class Asker(threading.Thread):
    """Queries www.ramp.test over UDP in small bursts until stopped; keeps (time sent,
    time answered, address) of every answer."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.answers = port, list[tuple[float, float, str]]()
        self.stopping = threading.Event()
        self.wire = bytearray(make_query("www.ramp.test", rd=False).pack())

    def run(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("127.0.0.1", self.port))
            s.settimeout(1.0)
            ident = 0
            while not self.stopping.is_set():
                sent = {}
                for _ in range(BURST):
                    ident = (ident + 1) & 0xFFFF
                    struct.pack_into("!H", self.wire, 0, ident)
                    sent[ident] = time.time()
                    s.send(self.wire)
                while sent:
                    try:
                        reply = s.recv(512)
                    except TimeoutError:
                        break
                    # no EDNS asked: one A record last, its address the last 4 bytes (the
                    # cheap read keeps the client fast enough on a loaded machine)
                    at = sent.pop(int.from_bytes(reply[:2], "big"), None)
                    if at is not None and reply[6:8] == b"\x00\x01":
                        self.answers.append((at, time.time(), socket.inet_ntoa(reply[-4:])))
                time.sleep(PAUSE_S)


def first_answer(port: int, expected: str, deadline_s: float) -> float:
    """Query until every one of 20 answers in a row is `expected`; when the first was."""
    query = make_query("www.ramp.test", rd=False)
    deadline, first, streak = time.monotonic() + deadline_s, None, 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("127.0.0.1", port))
        s.settimeout(1.0)
        while streak < 20:
            assert time.monotonic() < deadline, f"never only {expected}"
            s.send(query.pack())
            got = str(DNSRecord.parse(s.recv(512)).rr[0].rdata)
            if got == expected:
                first = first or time.monotonic()
                streak += 1
            else:
                first, streak = None, 0
                time.sleep(0.01)
    assert first is not None
    return first


def judged(share: float, hits: int, n: int) -> bool:
    half = Z999 * math.sqrt(share * (1 - share) / n)
    return abs(hits / n - share) <= min(half, 0.10) or (share == 1.0 and hits == n)


def test_a_recovered_primary_gets_its_traffic_back_in_steps(tmp_path: Path) -> None:
    loop = LoopThread()
    primary = DemoBackend("primary", host=PRIMARY, control_port=None)
    backup = DemoBackend("backup", host=BACKUP, control_port=None)
    try:
        loop.call(primary.start())
        loop.call(backup.start())
        (tmp_path / "ramp.yaml").write_text(config(primary.port, backup.port))
        # ~2,000 answers a second to one client: response rate limiting off for this test
        with DnsdProcess(tmp_path, "--rrl-rate", "0") as dnsd:
            first_answer(dnsd.port, PRIMARY, 15)
            # the primary fails: left at once, within the detection bound
            failed_at = time.monotonic()
            loop.call(primary.set_mode("503"))
            left = first_answer(dnsd.port, BACKUP, 15) - failed_at
            bound = INTERVAL_S * UNHEALTHY_THRESHOLD + TIMEOUT_S
            assert left <= bound + 0.5, f"left the failed primary after {left:.2f} s"
            _, status = http(dnsd.admin_port, "GET", "/api/v1/status?lb=web")
            assert status["load_balancers"][0]["ramp"]["in_force"] == [], status
            # it recovers: its share rises in steps
            asker = Asker(dnsd.port)
            asker.start()
            loop.call(primary.set_mode("ok"))
            deadline = time.monotonic() + 10
            while not (
                ramp := http(dnsd.admin_port, "GET", "/api/v1/status?lb=web")[1]["load_balancers"][
                    0
                ]["ramp"]
            )["in_force"]:
                assert time.monotonic() < deadline, "no ramp started"
                time.sleep(0.05)
            since = ramp["in_force"][0]["since"]
            assert {r["from"] for r in ramp["in_force"]} == {"backup"}
            time.sleep(max(0.0, since + 2.5 - time.time()))  # spread the checks over the steps
            _, metrics = http(dnsd.admin_port, "GET", "/metrics")
            shared = 'dnsd_lb_ramp_share{lb="web",pool="primary",region="unknown"} 0.4'
            assert shared in metrics, metrics  # step 2 of 5
            time.sleep(max(0.0, since + 6.2 - time.time()))  # step 4: 80 %
            server = f"http://127.0.0.1:{dnsd.admin_port}"
            command = [sys.executable, "-m", "dnsd", "explain", "www.ramp.test", "--server", server]
            explained = subprocess.run(command, capture_output=True, text=True, timeout=30).stdout
            assert "ramp from backup to primary: step 4 of 5, 80% to primary" in explained, (
                explained
            )
            _, events = http(dnsd.admin_port, "GET", "/api/v1/events?kind=ramp")
            [event] = events["events"]
            assert (event["lb"], event["from_pool"], event["to_pool"]) == (
                "web",
                "backup",
                "primary",
            )
            time.sleep(max(0.0, since + STEPS * STEP_S + 0.5 - time.time()))
            asker.stopping.set()
            asker.join(5)
        windows: list[list[str]] = [[] for _ in range(STEPS)]
        for sent, answered, address in asker.answers:
            k = math.floor((sent - since) / STEP_S)
            if not 0 <= k < STEPS or math.floor((answered - since) / STEP_S) != k:
                continue
            if min(sent - since - k * STEP_S, (k + 1) * STEP_S - (answered - since)) < EDGE_S:
                continue
            windows[k].append(address)
        shares = []
        for k, window in enumerate(windows):
            share, n, hits = (k + 1) / STEPS, len(window), window.count(PRIMARY)
            shares.append((share, hits, n))
            assert n >= 2000, f"step {k + 1}: only {n} answers"
            assert judged(share, hits, n), f"step {k + 1}: {hits}/{n} to the primary, not {share}"
        assert all(hits < n for _, hits, n in shares[:-1]), shares  # never 100 % at once
        print("ramp shares (expected, primary, answers):", shares, f"left after {left:.2f} s")
    finally:
        loop.call(primary.stop())
        loop.call(backup.stop())
        loop.close()
