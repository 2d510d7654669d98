"""octoDNS (the real package from PyPI, its own command-line tools) syncs into dnsd through
the config API: static records and a dynamic record — two pools, a rule for
EU, a fallback — served with ECS from an EU and a US subnet as octoDNS means them,
failing over along the pool's fallback chain and then to the record's values; a second
sync plans nothing; octodns-dump reads the same records back; what dnsd cannot serve is
refused at plan time with a reason."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from octodns.provider.yaml import YamlProvider
from octodns.zone import Zone

from dnsd.drill.backend import DemoBackend
from dnsd.drill.ports import free_port_pair
from tests.admin_client import http
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess

TOKEN = "octodns-sync-token"
EU, US = "81.2.69.0/24", "9.9.9.0/24"  # GB and US in the embedded GeoIP database
BACKENDS = {"eu1": "127.0.0.11", "eu2": "127.0.0.12", "us1": "127.0.0.21", "values": "127.0.0.41"}
DNSD_ZONE = """\
zone: oc.test
ttl: 300
soa: {mname: ns1.oc.test., rname: h.oc.test., minimum: 1}   # kept by every write
records:
  "@": {NS: [ns1.oc.test.]}   # the zone's own NS set: octoDNS leaves it alone
  ns1: {A: 127.0.0.1}
"""


def octodns_zone(port: int) -> dict:
    return {
        "": [
            {"type": "MX", "ttl": 300, "value": {"preference": 10, "exchange": "mail.oc.test."}},
            {"type": "TXT", "ttl": 300, "values": ["v=spf1 -all", "k=v\\; more"]},
        ],
        "ns1": {"type": "A", "ttl": 300, "value": "127.0.0.1"},
        "mail": {"type": "A", "ttl": 300, "value": "192.0.2.25"},
        "docs": {"type": "CNAME", "ttl": 300, "value": "www.oc.test."},
        "_sip._tcp": {
            "type": "SRV",
            "ttl": 300,
            "value": {"priority": 10, "weight": 5, "port": 5060, "target": "sip.oc.test."},
        },
        "www": {
            "type": "A",
            "ttl": 5,
            "values": [BACKENDS["values"]],
            "dynamic": {
                "pools": {
                    "eu": {
                        "values": [
                            {"value": BACKENDS["eu1"], "weight": 2},
                            {"value": BACKENDS["eu2"]},
                        ],
                        "fallback": "us",
                    },
                    "us": {"values": [{"value": BACKENDS["us1"]}]},
                },
                "rules": [{"pool": "eu", "geos": ["EU"]}, {"pool": "us"}],
            },
            "octodns": {
                "healthcheck": {"protocol": "HTTP", "port": port, "path": "/healthz"},
                "dnsd": {
                    "healthcheck": {
                        "interval": "0.3s",
                        "timeout": "0.25s",
                        "unhealthy_threshold": 2,
                    }
                },
            },
        },
    }


def write_octodns(tmp: Path, target: dict, zone: dict) -> Path:
    (tmp / "config").mkdir(exist_ok=True)
    (tmp / "config" / "oc.test.yaml").write_text(yaml.safe_dump(zone))
    config = {
        "providers": {
            "config": {"class": "octodns.provider.yaml.YamlProvider", "directory": str(tmp / "config")},
            "dnsd": {"class": "dnsd.octodns.DnsdProvider", **target},
        },
        "zones": {"oc.test.": {"sources": ["config"], "targets": ["dnsd"]}},
    }  # fmt: skip
    path = tmp / "octodns.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def octodns(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which(tool) or str(Path(sys.executable).parent / tool)
    # The tools import dnsd.octodns from this checkout (not whichever dnsd is installed).
    checkout = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (checkout, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, DNSD_TOKEN=TOKEN, PYTHONPATH=path)
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, env=env)


def dig(port: int, name: str, *extra: str) -> list[str]:
    out = subprocess.run(
        ["dig", "@127.0.0.1", "-p", str(port), name, "+short", "+tries=1", "+time=2", *extra],
        capture_output=True, text=True, timeout=10, check=True,
    )  # fmt: skip
    return out.stdout.splitlines()


def wait_answer(port: int, subnet: str, wanted: set[str], timeout: float) -> float:
    started = time.monotonic()
    while True:
        got = set(dig(port, "www.oc.test", f"+subnet={subnet}"))
        if got and got <= wanted:
            return time.monotonic() - started
        assert time.monotonic() - started < timeout, (subnet, got, wanted)
        time.sleep(0.05)


@pytest.fixture
def backends():
    loop = LoopThread()
    port = free_port_pair()
    started = {n: loop.call(DemoBackend(n, host=a, port=port, control_port=None).start()) for n, a in BACKENDS.items()}  # fmt: skip
    yield loop, started, port
    for backend in started.values():
        loop.call(backend.stop())
    loop.close()


def test_octodns_sync_into_dnsd_serves_dynamic_records_as_octodns_means(tmp_path: Path, backends) -> None:  # fmt: skip
    loop, started, check_port = backends
    zones = tmp_path / "zones"
    zones.mkdir()
    (zones / "oc.yaml").write_text(DNSD_ZONE)
    with DnsdProcess(zones, "--rrl-rate", "0", env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:
        target = {"url": f"http://127.0.0.1:{dnsd.admin_port}", "token": "env/DNSD_TOKEN"}
        config = write_octodns(tmp_path, target, octodns_zone(check_port))
        done = octodns("octodns-sync", "--config-file", str(config), "--doit")
        assert done.returncode == 0, done.stderr[-3000:]
        # static records as any authoritative server answers them
        assert dig(dnsd.port, "mail.oc.test") == ["192.0.2.25"]
        assert dig(dnsd.port, "oc.test", "MX") == ["10 mail.oc.test."]
        assert sorted(dig(dnsd.port, "oc.test", "TXT")) == ['"k=v; more"', '"v=spf1 -all"']
        assert dig(dnsd.port, "oc.test", "NS") == ["ns1.oc.test."]  # kept
        # the dynamic record: EU clients → the eu pool, others → the catch-all rule's pool
        wait_answer(dnsd.port, EU, {BACKENDS["eu1"], BACKENDS["eu2"]}, 5)
        wait_answer(dnsd.port, US, {BACKENDS["us1"]}, 5)
        # eu down: EU follows the pool's fallback (us); everything down: the record's values
        for name in ("eu1", "eu2"):
            loop.call(started[name].set_mode("503"))
        took = wait_answer(dnsd.port, EU, {BACKENDS["us1"]}, 5)
        loop.call(started["us1"].set_mode("503"))
        wait_answer(dnsd.port, EU, {BACKENDS["values"]}, 5)
        wait_answer(dnsd.port, US, {BACKENDS["values"]}, 5)
        print(f"EU moved to the fallback pool after {took:.2f} s")
        # a second sync plans nothing
        again = octodns("octodns-sync", "--config-file", str(config))
        assert again.returncode == 0, again.stderr[-3000:]
        assert "No changes were planned" in again.stdout + again.stderr, again.stdout + again.stderr
        # dnsd as a source: octodns-dump reads back the records that were synced
        dump = tmp_path / "dump"
        done = octodns("octodns-dump", "--config-file", str(config), "--output-dir", str(dump), "oc.test.", "dnsd")  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        dumped = _records(dump)
        # dnsd's own NS set is read back too (SUPPORTS_ROOT_NS): the source had none
        assert dumped.pop(("", "NS")) == {"ttl": 300, "value": "ns1.oc.test."}
        assert _records(tmp_path / "config") == dumped
    # what was written is a configuration `dnsd check` accepts, names octoDNS's
    result = subprocess.run([sys.executable, "-m", "dnsd", "check", str(zones)], capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "octodns~www.oc.test~A" in (zones / "oc.yaml").read_text()


def test_directory_target_and_refusals_at_plan_time(tmp_path: Path) -> None:
    zones = tmp_path / "zones"
    zones.mkdir()
    (zones / "oc.yaml").write_text(DNSD_ZONE)
    config = write_octodns(tmp_path, {"directory": str(zones)}, octodns_zone(8080))
    done = octodns("octodns-sync", "--config-file", str(config), "--doit")
    assert done.returncode == 0, done.stderr[-3000:]
    text = (zones / "oc.yaml").read_text()
    assert "# kept by every write" in text and "www: {lb: octodns~www.oc.test~A}" in text
    assert "octodns~www.oc.test~A~eu:" in (zones / "provisioned.yaml").read_text()
    assert subprocess.run([sys.executable, "-m", "dnsd", "check", str(zones)]).returncode == 0
    before = text
    # subnet rules, value status and ICMP checks have no dnsd meaning: refused, nothing written
    refusals = {
        "subnet": (
            {"rules": [{"pool": "eu", "subnets": ["10.0.0.0/8"]}, {"pool": "us"}]},
            "subnet",
        ),
        "status": (
            {
                "pools": {
                    "eu": {"values": [{"value": "127.0.0.11", "status": "down"}]},
                    "us": {"values": [{"value": "127.0.0.21"}]},
                }
            },
            "status",
        ),
        "icmp": ({}, "ICMP"),
    }
    for case, (dynamic, reason) in refusals.items():
        zone = octodns_zone(8080)
        zone["www"]["dynamic"].update(dynamic)
        if case == "icmp":
            zone["www"]["octodns"]["healthcheck"] = {"protocol": "ICMP"}
        config = write_octodns(tmp_path, {"directory": str(zones)}, zone)
        done = octodns("octodns-sync", "--config-file", str(config), "--doit")
        assert done.returncode != 0 and reason in done.stderr, (case, done.stderr[-2000:])
        assert (zones / "oc.yaml").read_text() == before


def _records(directory: Path) -> dict:
    zone = Zone("oc.test.", [])
    YamlProvider("x", str(directory)).populate(zone)
    return {(r.name, r._type): r.data for r in zone.records}


# A source zone as most real zones are — an apex NS set — with the record types
# octoDNS knows beyond the basic ones, synced with octoDNS's defaults (strict_supports).
RICH_SOURCE = {
    "": [
        {"type": "NS", "ttl": 300, "values": ["ns1.oc.test.", "ns2.oc.test."]},
        {"type": "HTTPS", "ttl": 300, "value": {"svcpriority": 1, "targetname": ".", "svcparams": {"alpn": ["h2", "h3"]}}},
        {"type": "CAA", "ttl": 300, "value": {"flags": 0, "tag": "issue", "value": "letsencrypt.org"}},
    ],
    "ns1": {"type": "A", "ttl": 300, "value": "127.0.0.1"},
    "ns2": {"type": "A", "ttl": 300, "value": "127.0.0.2"},
    "_dns.ns1": {"type": "SVCB", "ttl": 300, "value": {"svcpriority": 1, "targetname": "ns1.oc.test.", "svcparams": {"alpn": ["dot"]}}},
    "_25._tcp.mail": {"type": "TLSA", "ttl": 300, "value": {"certificate_usage": 3, "selector": 1, "matching_type": 1, "certificate_association_data": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}},
    "host": {"type": "SSHFP", "ttl": 300, "value": {"algorithm": 4, "fingerprint_type": 2, "fingerprint": "9dd2ae4e1e7d6e37bd3e6c3ee1c44b4a1ac2d3a4e5f60718293a4b5c6d7e8fe1"}},
    "sip": {"type": "NAPTR", "ttl": 300, "value": {"order": 10, "preference": 100, "flags": "S", "service": "SIP+D2U", "regexp": "", "replacement": "_sip._udp.oc.test."}},
    "old": {"type": "DNAME", "ttl": 300, "value": "new.oc.test."},
    "_http._tcp": {"type": "URI", "ttl": 300, "value": {"priority": 10, "weight": 1, "target": "https://www.oc.test/"}},
    "loc": {"type": "LOC", "ttl": 300, "value": {"lat_degrees": 52, "lat_minutes": 22, "lat_seconds": 23.0, "lat_direction": "N", "long_degrees": 4, "long_minutes": 53, "long_seconds": 32.0, "long_direction": "E", "altitude": -2.0, "size": 1.0, "precision_horz": 10000.0, "precision_vert": 10.0}},
    "txt": {"type": "TXT", "ttl": 300, "values": ["v=spf1 -all", "a\\; b"]},
}  # fmt: skip


def test_a_source_with_a_root_ns_and_new_types_syncs_with_defaults(tmp_path: Path) -> None:
    zones = tmp_path / "zones"
    zones.mkdir()
    # The zone as the servers already announce it: the source's NS set matches, so the
    # sync needs no --force (octoDNS asks for it on any root NS change of an existing zone).
    (zones / "oc.yaml").write_text(
        DNSD_ZONE.replace("[ns1.oc.test.]", "[ns1.oc.test., ns2.oc.test.]")
    )
    config = write_octodns(tmp_path, {"directory": str(zones)}, RICH_SOURCE)
    done = octodns("octodns-sync", "--config-file", str(config), "--doit")
    assert done.returncode == 0, done.stderr[-3000:]
    assert subprocess.run([sys.executable, "-m", "dnsd", "check", str(zones)]).returncode == 0
    again = octodns("octodns-sync", "--config-file", str(config))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "No changes were planned" in again.stdout + again.stderr, again.stdout + again.stderr
    with DnsdProcess(zones, "--rrl-rate", "0") as dnsd:
        assert sorted(dig(dnsd.port, "oc.test", "NS")) == ["ns1.oc.test.", "ns2.oc.test."]
        assert dig(dnsd.port, "oc.test", "HTTPS") == ['1 . alpn="h2,h3"']
        assert dig(dnsd.port, "_dns.ns1.oc.test", "SVCB") == ['1 ns1.oc.test. alpn="dot"']
        assert dig(dnsd.port, "old.oc.test", "DNAME") == ["new.oc.test."]
        assert dig(dnsd.port, "x.old.oc.test", "A")[:1] == ["new.oc.test."] or dig(
            dnsd.port, "x.old.oc.test", "CNAME"
        ) == ["x.new.oc.test."]
        assert sorted(dig(dnsd.port, "txt.oc.test", "TXT")) == ['"a; b"', '"v=spf1 -all"']
        dump = tmp_path / "dump"
        done = octodns("octodns-dump", "--config-file", str(config), "--output-dir", str(dump), "oc.test.", "dnsd")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert _records(tmp_path / "config") == _records(dump)
    # A new NS set in the source is synced too (with --force, as octoDNS requires).
    changed = dict(RICH_SOURCE, **{"": [dict(RICH_SOURCE[""][0], values=["ns1.oc.test."]), *RICH_SOURCE[""][1:]]})  # fmt: skip
    config = write_octodns(tmp_path, {"directory": str(zones)}, changed)
    done = octodns("octodns-sync", "--config-file", str(config), "--doit", "--force")
    assert done.returncode == 0, done.stderr[-3000:]
    with DnsdProcess(zones, "--rrl-rate", "0") as dnsd:
        assert dig(dnsd.port, "oc.test", "NS") == ["ns1.oc.test."]


def test_octodns_sync_creates_a_zone_dnsd_does_not_have(tmp_path: Path) -> None:
    """As octoDNS users expect of a target (the PowerDNS provider does it): a sync to a zone
    dnsd does not serve yet creates it — its own YAML file, the SOA from defaults or the
    provider's `soa:` option — in the same change set as its records; a second sync is a
    no-op."""
    zones = tmp_path / "zones"
    zones.mkdir()
    (zones / "seed.yaml").write_text(DNSD_ZONE.replace("oc.test", "seed.test"))
    with DnsdProcess(zones, "--rrl-rate", "0", env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:
        assert dig(dnsd.port, "oc.test", "SOA") == []  # not a zone of this server
        target = {"url": f"http://127.0.0.1:{dnsd.admin_port}", "token": "env/DNSD_TOKEN"}
        config = write_octodns(tmp_path, target, RICH_SOURCE)
        done = octodns("octodns-sync", "--config-file", str(config), "--doit")
        assert done.returncode == 0, done.stderr[-3000:]
        # the default SOA: mname the first of the source's NS names, rname hostmaster,
        # the serial dnsd's own, the timers dnsd's defaults
        soa = dig(dnsd.port, "oc.test", "SOA")[0].split()
        assert soa[:2] == ["ns1.oc.test.", "hostmaster.oc.test."] and soa[3:] == ["7200", "900", "1209600", "300"], soa  # fmt: skip
        assert sorted(dig(dnsd.port, "oc.test", "NS")) == ["ns1.oc.test.", "ns2.oc.test."]
        assert dig(dnsd.port, "ns2.oc.test") == ["127.0.0.2"]
        assert sorted(dig(dnsd.port, "txt.oc.test", "TXT")) == ['"a; b"', '"v=spf1 -all"']
        again = octodns("octodns-sync", "--config-file", str(config), "--doit")
        assert again.returncode == 0, again.stderr[-3000:]
        assert "No changes were planned" in again.stdout + again.stderr, again.stdout + again.stderr
        # one write, through the config API with the token: audited as such
        status, body = http(dnsd.admin_port, "GET", "/api/v1/audit", token=TOKEN)
        writes = [e for e in body["entries"] if e["route"] == "/api/v1/config/changes"]
        assert status == 200 and len(writes) == 1 and writes[0]["status"] == 200, writes
        assert writes[0]["before"]["zones/oc.test"] is None
        assert writes[0]["after"]["zones/oc.test"] == {"soa": {"mname": "ns1.oc.test.", "rname": "hostmaster.oc.test."}}  # fmt: skip
    assert sorted(p.name for p in zones.glob("*.yaml")) == ["oc.test.yaml", "seed.yaml"]
    result = subprocess.run([sys.executable, "-m", "dnsd", "check", str(zones)], capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr
    # the SOA from the provider's option (here into a directory); an unknown key is refused
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    option = {"directory": str(fresh), "soa": {"mname": "pri.oc.test.", "rname": "ops.oc.test.", "minimum": 30}}  # fmt: skip
    done = octodns("octodns-sync", "--config-file", str(write_octodns(tmp_path, option, RICH_SOURCE)), "--doit")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        (fresh / "oc.test.yaml")
        .read_text()
        .startswith(
            "zone: oc.test\nsoa: {mname: pri.oc.test., rname: ops.oc.test., minimum: 30}\nrecords:\n"
        )
    )
    option["soa"] = {"serail": 1}
    done = octodns("octodns-sync", "--config-file", str(write_octodns(tmp_path, option, RICH_SOURCE)), "--doit")  # fmt: skip
    assert done.returncode != 0 and "soa: unknown keys ['serail']" in done.stderr, done.stderr[
        -2000:
    ]
