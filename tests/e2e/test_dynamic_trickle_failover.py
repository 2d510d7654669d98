"""Dynamic steering with a trickle: when the fastest (and only monitored) pool fails, the
survivors have no RTT data, and the answers fail over to the first of them — real `dig`
against a real `python -m dnsd serve` probing a real HTTP backend; ≥ 2,000 answers, not one
for the third pool (docs/steering.md, trickle)."""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from pathlib import Path

from dnsd.drill.backend import DemoBackend
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess

POOL_OF = {"127.0.0.31": "fast", "192.0.2.41": "first", "192.0.2.42": "third"}


def config(port: int) -> str:
    return f"""\
zone: dyn.test
soa: {{mname: ns1.dyn.test., rname: h.dyn.test.}}
records:
  "@": {{NS: ns1.dyn.test.}}
  ns1: {{A: 192.0.2.1}}
  www: {{lb: w}}
monitors:
  m: {{type: http, interval: 100ms, timeout: 500ms, healthy_threshold: 1, unhealthy_threshold: 1}}
pools:
  fast: {{monitor: m, backends: [{{name: fast-1, address: 127.0.0.31, port: {port}}}]}}
  first: {{backends: [{{name: first-1, address: 192.0.2.41}}]}}
  third: {{backends: [{{name: third-1, address: 192.0.2.42}}]}}
load_balancers:
  w: {{ttl: 1, steering: dynamic, default_pools: [first, third, fast], trickle_ratio: 0.2,
       min_samples: 1, rtt_max_age: 1h}}
"""


def answers(tmp_path: Path, port: int, n: int) -> Counter[str]:
    """n answers from one real `dig` in batch mode (-f), pool by pool."""
    batch = tmp_path / "queries.txt"
    query = f"@127.0.0.1 -p {port} +short +tries=3 +time=1 www.dyn.test A"
    batch.write_text(f"{query}\n" * (n - 1))
    # the first query on the command line: without one dig -f also asks its resolver for "."
    out = subprocess.run(
        ["dig", *query.split(), "-f", str(batch)], capture_output=True, text=True, timeout=120
    ).stdout.split()
    got = Counter(POOL_OF[a] for a in out if a in POOL_OF)  # not a timed-out query's ";;" line
    assert got.total() >= 0.99 * n, out[:40]
    return got


def test_fastest_pool_failing_under_trickle_sends_nothing_to_a_third_pool(tmp_path: Path) -> None:
    loop = LoopThread()
    backend = DemoBackend("fast", host="127.0.0.31", control_port=None)
    try:
        loop.call(backend.start())
        (tmp_path / "dyn.yaml").write_text(config(backend.port))
        with DnsdProcess(tmp_path) as dnsd:
            deadline = time.monotonic() + 10
            while (healthy := answers(tmp_path, dnsd.port, 200))["fast"] < 120:
                assert time.monotonic() < deadline, healthy  # fast measured and ranked first
            assert healthy["third"] == 0, healthy  # the trickle goes to the first other pool
            loop.call(backend.set_mode("503"))
            deadline = time.monotonic() + 10
            while answers(tmp_path, dnsd.port, 20)["fast"]:
                assert time.monotonic() < deadline, "fast never taken out"
            failed = answers(tmp_path, dnsd.port, 2_100)
            assert failed["first"] >= 2_000 and set(failed) == {"first"}, failed
    finally:
        loop.call(backend.stop())
        loop.close()
