"""A config API write costs what it changes, not what the directory holds: beside a
40,000-record zone in its own file, writes to a small file are answered in seconds (each
took ~46 s when every write read, parsed and validated every file again), are served,
audited and on disk, leave the big file byte for byte as it was, and a bad write still
changes nothing. A record of the big zone itself changes its one line and nothing else."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from dnslib import DNSRecord

from tests.dnsclient import udp_raw
from tests.processes import DnsdProcess

DATA = Path(__file__).parent.parent / "data"
TOKEN = "config-write-cost-token"
RECORDS = 40_000
BOUND_S = 10.0  # generous for a shared machine: the target is 2 s, the old code took ~46
BIG_BOUND_S = 120.0  # the big file itself is parsed and validated again (old: minutes more)


def big_zone(path: Path) -> None:
    lines = ["zone: big.test", "soa: {mname: ns1.big.test., rname: h.big.test., minimum: 60}",
             "records:", '  "@": {NS: ns1.big.test.}', "  ns1: {A: 127.0.0.1}"]  # fmt: skip
    lines += [f"  h{i:05d}: {{A: 10.0.{i // 256 % 256}.{i % 256}}}" for i in range(RECORDS)]
    path.write_text("\n".join(lines) + "\n")


def call(port: int, method: str, route: str, body: Any = None) -> tuple[int, Any, float]:
    """(status, JSON body, seconds): with no client timeout shorter than the old cost."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{route}", data=data, method=method,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )  # fmt: skip
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            status, text = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read()
    return status, json.loads(text), time.monotonic() - started


def answers(port: int, name: str) -> list[str]:
    raw = udp_raw(port, DNSRecord.question(name).pack(), timeout=2.0)
    assert raw is not None, f"{name}: no answer"
    return [str(rr.rdata) for rr in DNSRecord.parse(raw).rr]


def test_writes_beside_a_40000_record_zone_take_seconds_and_keep_every_guarantee(
    tmp_path: Path,
) -> None:
    zones = tmp_path / "zones"
    shutil.copytree(DATA / "good", zones)
    big = zones / "big.test.yaml"
    big_zone(big)
    big_digest = hashlib.sha256(big.read_bytes()).hexdigest()
    env = {"DNSD_ADMIN_TOKEN": TOKEN}
    with DnsdProcess(zones, "--rrl-rate", "0", env=env, start_timeout_s=240) as dnsd:
        took = []
        for i in range(3):
            route = f"/api/v1/config/pools/us-east/backends/extra{i}"
            status, body, seconds = call(dnsd.admin_port, "PUT", route, {"address": f"192.0.2.{210 + i}"})  # fmt: skip
            assert status == 201, body
            took.append(seconds)
        print(f"3 writes beside {RECORDS} records: " + ", ".join(f"{t:.2f} s" for t in took))
        assert max(took) < BOUND_S, took
        status, pool, _ = call(dnsd.admin_port, "GET", "/api/v1/config/pools/us-east")
        assert status == 200
        assert [b["name"] for b in pool["backends"]][-3:] == ["extra0", "extra1", "extra2"]
        # the new config serves, the big zone too
        assert answers(dnsd.port, "h39999.big.test") == ["10.0.156.63"]
        # a bad write (an undefined pool) is refused whole, just as fast: nothing changes
        before = {p.name: p.read_bytes() for p in zones.glob("*.yaml")}
        status, body, seconds = call(dnsd.admin_port, "PUT", "/api/v1/config/load_balancers/bad",
                                     {"default_pools": ["no-such-pool"]})  # fmt: skip
        assert status == 400 and any("no-such-pool" in e for e in body["errors"]), body
        assert seconds < BOUND_S, seconds
        assert {p.name: p.read_bytes() for p in zones.glob("*.yaml")} == before
        # the writes to the small file left the big one byte for byte as it was
        assert hashlib.sha256(big.read_bytes()).hexdigest() == big_digest
        # a record of the big zone itself: its one line changes, every other byte stays
        big_before = big.read_text()
        status, body, seconds = call(dnsd.admin_port, "PUT", "/api/v1/config/zones/big.test/records/h00007",
                                     {"A": "10.9.9.9"})  # fmt: skip
        assert status == 200, body
        print(f"a write into the big zone's file: {seconds:.2f} s")
        assert seconds < BIG_BOUND_S, seconds
        assert big.read_text() == big_before.replace(
            "  h00007: {A: 10.0.0.7}\n", "  h00007: {A: 10.9.9.9}\n"
        )
        assert answers(dnsd.port, "h00007.big.test") == ["10.9.9.9"]
        # every write, refused or not, is audited
        status, audit, _ = call(dnsd.admin_port, "GET", "/api/v1/audit")
        routes = [e["route"] for e in audit["entries"]]
        assert routes.count("/api/v1/config/load_balancers/bad") == 1
        assert all(f"/api/v1/config/pools/us-east/backends/extra{i}" in routes for i in range(3))
    assert "extra2" in (zones / "example.test.yaml").read_text()
