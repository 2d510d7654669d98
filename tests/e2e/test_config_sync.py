"""Config API writes reach every node through a real redis-server: a write on
node a is served by b and c within 2 s, a node started later catches up, a node whose
directory cannot take a change reports it and keeps serving, and a message without the
cluster's seal changes nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from dnslib import DNSRecord

from dnsd.cluster.config_channel import CHANNEL
from tests.admin_client import http
from tests.dnsclient import udp_raw
from tests.processes import DnsdProcess, Redis

TOKEN = "sync-token"
KEY = "config-sync-cluster-key-0123456789"
CONFIG = """\
zone: sync.test
soa: {mname: ns1.sync.test., rname: h.sync.test., minimum: 1}
records:
  "@": {NS: ns1.sync.test.}
  ns1: {A: 127.0.0.1}
  www: {lb: www}
pools:
  p1: {backends: [{name: b1, address: 192.0.2.1}]}
load_balancers:
  www: {ttl: 1, default_pools: [p1]}
"""


def answers(port: int, name: str) -> list[str]:
    raw = udp_raw(port, DNSRecord.question(name).pack())
    assert raw is not None
    return sorted(str(rr.rdata) for rr in DNSRecord.parse(raw).rr)


def wait_for(port: int, name: str, want: list[str], timeout: float) -> float:
    started = time.monotonic()
    while answers(port, name) != want:
        assert time.monotonic() - started < timeout, (name, answers(port, name))
        time.sleep(0.02)
    return time.monotonic() - started


def node(tmp: Path, name: str, redis: Redis) -> DnsdProcess:
    zones = tmp / name / "zones"
    zones.mkdir(parents=True)
    (zones / "sync.yaml").write_text(CONFIG)
    (tmp / "cluster.key").write_text(KEY)
    return DnsdProcess(
        zones, "--redis", f"redis://127.0.0.1:{redis.port}/0", "--node", name, "--pop-region",
        {"a": "WNAM", "b": "ENAM", "c": "WEU"}.get(name, "WEU"),
        "--redis-key-file", str(tmp / "cluster.key"), "--state-dir", str(tmp / name / "state"),
        env={"DNSD_ADMIN_TOKEN": TOKEN},
    )  # fmt: skip


@pytest.fixture
def redis():
    server = Redis().start()
    yield server
    server.kill()


def test_a_write_on_one_node_is_served_by_every_node(tmp_path: Path, redis: Redis) -> None:
    nodes = {n: node(tmp_path, n, redis).__enter__() for n in "abc"}
    try:
        for proc in nodes.values():
            proc.wait_for_log("sharing health as node")
        record = {"A": ["192.0.2.50"], "ttl": 5}
        route = "/api/v1/config/zones/sync.test/records/new"
        assert http(nodes["a"].admin_port, "PUT", route, record, token=TOKEN)[0] == 201
        assert answers(nodes["a"].port, "new.sync.test") == ["192.0.2.50"]
        took = max(wait_for(nodes[n].port, "new.sync.test", ["192.0.2.50"], 2.0) for n in "bc")
        print(f"write on a served by b and c after {took:.2f} s")
        assert (
            "new: {A: [192.0.2.50], ttl: 5}" in (tmp_path / "b" / "zones" / "sync.yaml").read_text()
        )
        # a pool and its backend, then a deletion, travel the same way
        pool = "/api/v1/config/pools/p1/backends/b2"
        assert (
            http(nodes["b"].admin_port, "PUT", pool, {"address": "192.0.2.2"}, token=TOKEN)[0]
            == 201
        )
        for n in "ac":
            wait_for(nodes[n].port, "www.sync.test", ["192.0.2.1"], 2.0)  # max_answers 1: either
            wait_for_pool(nodes[n].admin_port, ["b1", "b2"])
        assert http(nodes["c"].admin_port, "DELETE", route, token=TOKEN)[0] == 200
        for n in "ab":
            wait_for(nodes[n].port, "new.sync.test", [], 2.0)
        # a node started later (its directory as it was at the start) catches up
        late = node(tmp_path, "d", redis).__enter__()
        nodes["d"] = late
        wait_for_pool(late.admin_port, ["b1", "b2"], timeout=10.0)
        assert answers(late.port, "new.sync.test") == []
        # a change one node's directory cannot take: that node says so and keeps serving
        (tmp_path / "c" / "zones" / "sync.yaml").write_text(CONFIG.replace("p1", "p9"))
        assert http(nodes["c"].admin_port, "POST", "/api/v1/reload", token=TOKEN)[0] == 200
        lb = {"default_pools": ["p1"], "ttl": 2}
        assert http(nodes["a"].admin_port, "PUT", "/api/v1/config/load_balancers/www", lb, token=TOKEN)[0] == 200  # fmt: skip
        deadline = time.monotonic() + 3
        while not (error := http(nodes["c"].admin_port, "GET", "/api/v1/status")[1]["bus"]["config_sync"]["error"]):  # fmt: skip
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert "undefined pool 'p1'" in error
        assert answers(nodes["c"].port, "www.sync.test") == ["192.0.2.1"]
        # ... and says so loudly: diverged in the status and the metric, the others in step
        sync = http(nodes["c"].admin_port, "GET", "/api/v1/status")[1]["bus"]["config_sync"]
        assert sync["state"] == "diverged" and "refused here" in sync["diverged"]
        assert "dnsd_config_sync_diverged 1.0" in http(nodes["c"].admin_port, "GET", "/metrics")[1]
        assert "config sync DIVERGED" in nodes["c"].output
        deadline = time.monotonic() + 3
        while True:
            good = [http(nodes[n].admin_port, "GET", "/api/v1/status")[1]["bus"]["config_sync"] for n in "ab"]  # fmt: skip
            if {g["state"] for g in good} == {"in_sync"} and good[0]["digest"] == good[1]["digest"]:
                break
            assert time.monotonic() < deadline, good
            time.sleep(0.05)
        # a message without the cluster's seal is refused and counted
        redis.cli("publish", CHANNEL, '{"node": "a", "entries": []}')
        deadline = time.monotonic() + 2
        while not http(nodes["b"].admin_port, "GET", "/api/v1/status")[1]["bus"]["rejected"]:
            assert time.monotonic() < deadline, nodes["b"].output[-3000:]
            time.sleep(0.05)
    finally:
        for proc in nodes.values():
            proc.stop()


def wait_for_pool(admin: int, backends: list[str], timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        status, pool = http(admin, "GET", "/api/v1/config/pools/p1", token=TOKEN)
        if status == 200 and [b["name"] for b in pool["backends"]] == backends:
            return
        assert time.monotonic() < deadline, pool
        time.sleep(0.05)


def test_a_change_from_another_node_is_in_the_audit_trail(tmp_path: Path, redis: Redis) -> None:
    """The audit trail across nodes: node b records the change it applied from node a, with a's name."""
    nodes = {n: node(tmp_path, n, redis).__enter__() for n in "ab"}
    try:
        for proc in nodes.values():
            proc.wait_for_log("sharing health as node")
        route = "/api/v1/config/zones/sync.test/records/audited"
        assert http(nodes["a"].admin_port, "PUT", route, {"A": ["192.0.2.51"]}, TOKEN)[0] == 201
        wait_for(nodes["b"].port, "audited.sync.test", ["192.0.2.51"], 2.0)
        deadline = time.monotonic() + 2
        while True:
            status, body = http(nodes["b"].admin_port, "GET", "/api/v1/audit", token=TOKEN)
            synced = [e for e in body["entries"] if e["method"] == "SYNC"]
            if synced or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert status == 200 and len(synced) == 1, body
        entry = synced[0]
        assert entry["origin_node"] == "a" and entry["status"] == 200
        assert entry["route"] == "zones/sync.test/records/audited"
        assert entry["before"] == {"zones/sync.test/records/audited": None}
        assert entry["after"]["zones/sync.test/records/audited"] == {"A": ["192.0.2.51"]}
    finally:
        for proc in nodes.values():
            proc.__exit__(None, None, None)


def test_a_zone_created_on_one_node_is_served_by_the_others(tmp_path: Path, redis: Redis) -> None:
    """A new zone (config API `zones/Z`, as the octoDNS provider sends it: the zone and its
    records in one change set) reaches every node: each writes the zone's own file."""
    nodes = {n: node(tmp_path, n, redis).__enter__() for n in "ab"}
    try:
        for proc in nodes.values():
            proc.wait_for_log("sharing health as node")
        soa = {"mname": "ns1.made.test.", "rname": "hostmaster.made.test."}
        changes = [
            {"method": "PUT", "route": "zones/made.test", "body": {"soa": soa}},
            {"method": "PUT", "route": "zones/made.test/records/www", "body": {"A": ["192.0.2.52"]}},
        ]  # fmt: skip
        status, body = http(nodes["a"].admin_port, "POST", "/api/v1/config/changes", {"changes": changes}, TOKEN)  # fmt: skip
        assert status == 200, body
        assert answers(nodes["a"].port, "www.made.test") == ["192.0.2.52"]
        wait_for(nodes["b"].port, "www.made.test", ["192.0.2.52"], 2.0)
        assert (tmp_path / "b" / "zones" / "made.test.yaml").read_text().startswith("zone: made.test\n")  # fmt: skip
    finally:
        for proc in nodes.values():
            proc.__exit__(None, None, None)
