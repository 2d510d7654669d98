"""A cold pass over load balancers that each answer from pools of their own (dnsd.lb_shapes):
a real `python -m dnsd serve` probing real local HTTP backends answers each name, asked
once, with its own pool's address — from one class table for all of them — and counts it
under its own load balancer and pool; after some primaries fail their probes, a second
cold pass answers those names from their own standby pools and no name with a failed
backend."""

from __future__ import annotations

import socket
import time
import urllib.request
from pathlib import Path

from dnslib import QTYPE, DNSRecord
from prometheus_client.parser import text_string_to_metric_families

from dnsd.drill.backend import DemoBackend
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess

LBS = 24
FAILING = (0, 5, 11, 17)
PRIMARY = [f"127.0.3.{i + 1}" for i in range(LBS)]  # probed: a demo backend each
STANDBY = [f"127.0.4.{i + 1}" for i in range(LBS)]  # unmonitored: always healthy


def config(ports: dict[str, int]) -> str:
    records = "".join(f"  w{i}: {{lb: w{i}}}\n" for i in range(LBS))
    pools = "".join(
        f"  p{i}: {{monitor: m, backends: [{{name: a, address: {PRIMARY[i]}, port: {ports[PRIMARY[i]]}}}]}}\n"
        f"  q{i}: {{backends: [{{name: a, address: {STANDBY[i]}}}]}}\n"
        for i in range(LBS)
    )
    lbs = "".join(f"  w{i}: {{ttl: 30, default_pools: [p{i}, q{i}]}}\n" for i in range(LBS))
    return f"""\
zone: own.test
soa: {{mname: ns1.own.test., rname: h.own.test.}}
records:
  "@": {{NS: ns1.own.test.}}
  ns1: {{A: 192.0.2.1}}
{records}monitors:
  m: {{type: http, interval: 100ms, timeout: 500ms, healthy_threshold: 1, unhealthy_threshold: 1}}
pools:
{pools}load_balancers:
{lbs}"""


def cold_pass(port: int, spelling: str = "w{}.own.test") -> list[str]:
    """Each name asked once, in order, spelt as never before (the question's bytes are the
    answer cache's key: a first answer), from a fresh socket: the A address each got."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(2.0)
        got = []
        for i in range(LBS):
            query = DNSRecord.question(spelling.format(i), "A")
            sock.sendto(query.pack(), ("127.0.0.1", port))
            reply = DNSRecord.parse(sock.recvfrom(4096)[0])
            assert reply.header.id == query.header.id
            assert str(reply.q.qname) == spelling.format(i) + ".", reply  # as asked
            addresses = [str(rr.rdata) for rr in reply.rr if rr.rtype == QTYPE.A]
            assert len(addresses) == 1, reply
            got.append(addresses[0])
    return got


def metrics(admin_port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def misses(admin_port: int) -> float:
    return next(
        value
        for labels, value in metrics(admin_port)["dnsd_answer_cache_total"]
        if labels["result"] == "miss"
    )


def lb_answers(admin_port: int) -> dict[tuple[str, str], float]:
    return {
        (labels["lb"], labels["pool"]): value
        for labels, value in metrics(admin_port).get("dnsd_lb_answers_total", [])
    }


def test_a_cold_pass_answers_each_name_from_its_own_pool(tmp_path: Path) -> None:
    loop = LoopThread()
    backends = {a: DemoBackend(a, host=a, control_port=None) for a in PRIMARY}
    try:
        for backend in backends.values():
            loop.call(backend.start())
        (tmp_path / "own.yaml").write_text(config({a: b.port for a, b in backends.items()}))
        with DnsdProcess(tmp_path, "--rrl-rate", "0") as dnsd:
            time.sleep(1.0)  # every primary probed healthy (100 ms apart) before the pass
            assert cold_pass(dnsd.port) == PRIMARY
            assert misses(dnsd.admin_port) <= 2  # 24 first answers from one Python decision
            counted = lb_answers(dnsd.admin_port)
            assert all(counted.get((f"w{i}", f"p{i}")) == 1 for i in range(LBS)), counted
            for i in FAILING:
                loop.call(backends[PRIMARY[i]].set_mode("503"))
            deadline = time.monotonic() + 10
            while [cold_pass(dnsd.port, "w{}.OWN.test")[i] for i in FAILING] != [
                STANDBY[i] for i in FAILING
            ]:
                assert time.monotonic() < deadline, "a failed primary still answered"
                time.sleep(0.2)
            time.sleep(1.0)  # every failing primary's verdict is in
            before = misses(dnsd.admin_port)
            expected = [STANDBY[i] if i in FAILING else PRIMARY[i] for i in range(LBS)]
            for spelling in ("W{}.own.test", "w{}.Own.test", "w{}.oWn.test"):
                assert cold_pass(dnsd.port, spelling) == expected
            # 72 first answers, at most one Python decision per class (all up; primary down)
            assert misses(dnsd.admin_port) - before <= 2
    finally:
        for backend in backends.values():
            loop.call(backend.stop())
        loop.close()
