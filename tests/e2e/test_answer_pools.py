"""`answer_pools: 2, distinct: region` (docs/steering.md, several pools per answer): a real
`python -m dnsd serve` probing real local HTTP backends; real `dig` sees every answer hold
two addresses from two regions — while everything is healthy, and after the second region's
pool and then the first region's first pool fail their probes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from dnsd.drill.backend import DemoBackend
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess

# pool → (region, backend addresses): two pools in ENAM, one in WEU, one in NEAS
POOLS = {
    "use1": ("ENAM", ("127.0.0.61", "127.0.0.62")),
    "use2": ("ENAM", ("127.0.0.63",)),
    "eu": ("WEU", ("127.0.0.64",)),
    "ap": ("NEAS", ("127.0.0.65",)),
}
REGION = {address: region for region, addresses in POOLS.values() for address in addresses}


def config(ports: dict[str, int]) -> str:
    pools = "".join(
        f"  {name}: {{monitor: m, region: {region}, backends: ["
        + ", ".join(
            f"{{name: {name}-{i}, address: {a}, port: {ports[a]}}}" for i, a in enumerate(addresses)
        )
        + "]}\n"
        for name, (region, addresses) in POOLS.items()
    )
    return f"""\
zone: spread.test
soa: {{mname: ns1.spread.test., rname: h.spread.test.}}
records:
  "@": {{NS: ns1.spread.test.}}
  ns1: {{A: 192.0.2.1}}
  www: {{lb: web}}
monitors:
  m: {{type: http, interval: 100ms, timeout: 500ms, healthy_threshold: 1, unhealthy_threshold: 1}}
pools:
{pools}load_balancers:
  web: {{ttl: 1, default_pools: [use1, use2, eu, ap], answer_pools: 2, distinct: region}}
"""


def answers(port: int, count: int) -> list[tuple[str, ...]]:
    """The A answers of `count` queries for www.spread.test, from one real `dig` run."""
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
            "+comments",
            "+answer",
            *(["www.spread.test", "A"] * count),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout  # a block per reply, each opened by its header line
    blocks = out.split("->>HEADER<<-")[1:]
    assert len(blocks) == count, out
    replies = []
    for block in blocks:
        assert "status: NOERROR" in block, block
        lines = [line.split() for line in block.splitlines() if line and line[0] != ";"]
        replies.append(tuple(sorted(f[-1] for f in lines if len(f) == 5 and f[3] == "A")))
    return replies


def test_every_answer_has_two_addresses_from_two_regions(tmp_path: Path) -> None:
    loop = LoopThread()
    backends = {a: DemoBackend(a, host=a, control_port=None) for a in REGION}
    try:
        for backend in backends.values():
            loop.call(backend.start())
        ports = {a: b.port for a, b in backends.items()}
        (tmp_path / "spread.yaml").write_text(config(ports))
        with DnsdProcess(tmp_path, "--rrl-rate", "0") as dnsd:

            def settle(expected_pools: set[str]) -> None:
                """Wait until answers come from these pools' regions, then let the probe
                verdicts of the others arrive too."""
                regions = {POOLS[p][0] for p in expected_pools}
                deadline = time.monotonic() + 10
                while {REGION[a] for a in answers(dnsd.port, 1)[0]} != regions:
                    assert time.monotonic() < deadline, f"never answered from {expected_pools}"
                    time.sleep(0.1)
                time.sleep(0.5)

            phases = [
                ({"use1", "eu"}, ()),  # use2 skipped: ENAM is already in the answer
                ({"use1", "ap"}, ("127.0.0.64",)),  # eu fails: the next region
                ({"use2", "ap"}, ("127.0.0.61", "127.0.0.62")),  # use1 fails: use2 for ENAM
            ]
            for expected, failing in phases:
                for address in failing:
                    loop.call(backends[address].set_mode("503"))
                settle(expected)
                allowed = {a for p in expected for a in POOLS[p][1]}
                seen = answers(dnsd.port, 150)
                for reply in seen:
                    assert len(reply) == 2, reply
                    assert len({REGION[a] for a in reply}) == 2, reply
                    assert set(reply) <= allowed, (reply, expected)
                if expected == {"use1", "eu"}:  # one address of use1, drawn per answer
                    firsts = {reply[0] for reply in seen}
                    assert firsts == {"127.0.0.61", "127.0.0.62"}, firsts
            explained = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "dnsd",
                    "explain",
                    "www.spread.test",
                    "--server",
                    f"http://127.0.0.1:{dnsd.admin_port}",
                ],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout
            assert "answered: one address from each of use2, ap" in explained, explained
    finally:
        for backend in backends.values():
            loop.call(backend.stop())
        loop.close()
