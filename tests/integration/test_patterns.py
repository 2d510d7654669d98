"""The bundled zones/: the Cloud DNS active-passive and active-active patterns, explain, and
the embedded GeoIP database, all through the real query pipeline (answer_query)."""

from __future__ import annotations

import ipaddress
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from dnslib import EDNS0, DNSRecord

from dnsd.explain import ecs_option, health_with_down
from dnsd.geo.database import GeoDatabase
from dnsd.geo.locate import locate
from dnsd.geo.regions import region_table
from dnsd.health.view import HealthView
from dnsd.loading import load_snapshot
from dnsd.reply import Client
from dnsd.request import Request
from dnsd.resolve import answer_query
from tests.unit.test_steering import binomial_ok

ZONES = Path(__file__).parent.parent.parent / "zones"
BACKUP = {
    "202.12.27.0/24": "203.0.113.31",
    "81.2.69.0/24": "203.0.113.21",
    "3.0.0.0/24": "203.0.113.11",
}


@pytest.fixture(scope="module")
def snap():
    return load_snapshot(ZONES, 1, GeoDatabase())


def answers(snap, name: str, subnet: str, health: HealthView, n: int, seed: int = 1) -> Counter:
    rng = random.Random(seed)
    counts: Counter = Counter()
    for _ in range(n):
        query = DNSRecord.question(name)
        query.add_ar(EDNS0(udp_len=1232, opts=[ecs_option(subnet)]))
        reply = answer_query(
            query,
            Request(
                bytes(query.pack()),
                Client(ipaddress.ip_address("127.0.0.1"), "udp"),
                snap,
                health,
                rng,
                0.0,
            ),
        ).reply
        counts[str(reply.rr[0].rdata)] += 1
    return counts


@pytest.mark.parametrize("subnet", sorted(BACKUP))
def test_active_passive_trickles_ten_percent_to_the_client_region_backup(snap, subnet) -> None:
    counts = answers(snap, "active-passive.example.net", subnet, HealthView(), 10_000)
    assert set(counts) == {"203.0.113.1", BACKUP[subnet]}
    assert binomial_ok(counts[BACKUP[subnet]], 10_000, 0.1), counts


@pytest.mark.parametrize("subnet", sorted(BACKUP))
def test_active_passive_global_down_sends_every_client_to_its_region_backup(snap, subnet) -> None:
    health = health_with_down(snap.config, ["global-vip"])
    assert answers(snap, "active-passive.example.net", subnet, health, 200) == Counter(
        {BACKUP[subnet]: 200}
    )


def test_active_active_bypasses_the_global_layer_only_in_an_outage(snap) -> None:
    assert answers(snap, "active-active.example.net", "81.2.69.0/24", HealthView(), 200) == Counter(
        {"203.0.113.1": 200}
    )
    down = health_with_down(snap.config, ["global-vip"])
    assert answers(snap, "active-active.example.net", "81.2.69.0/24", down, 50) == Counter(
        {"203.0.113.21": 50}
    )


def test_embedded_database_locates_known_addresses_after_a_plain_install() -> None:
    db = GeoDatabase()  # no path: the database installed with the package
    table = region_table()
    expected = {
        "81.2.69.142": ("GB", "WEU"),
        "202.12.27.33": ("JP", "NEAS"),
        "41.0.0.1": ("ZA", "SAF"),
    }
    for address, (country, region) in expected.items():
        loc = locate(ipaddress.ip_address(address), db, table, None)
        assert (loc.country, loc.region, loc.source) == (country, region, "geoip")


def test_explain_json_has_the_documented_keys() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dnsd", "explain", "www.example.test", "--client", "81.2.69.142", "--json", "--dir", str(ZONES)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    info = json.loads(proc.stdout)
    for key in ("client", "region", "country", "policy", "candidates", "pool", "eligible",
                "zonal_match", "modified_eligible", "answer", "ttl", "ecs_scope"):  # fmt: skip
        assert key in info, key
    assert (info["client"], info["country"], info["region"], info["policy"]) == (
        "81.2.69.142",
        "GB",
        "WEU",
        "geo",
    )
    assert info["pool"] == "eu-west" and info["ttl"] == 30
    assert info["answer"][0] in {"198.51.100.10", "198.51.100.11"}
    assert {c["pool"] for c in info["candidates"]} == {"us-east", "eu-west", "maintenance"}


def test_explain_text_with_down_pool_and_ecs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dnsd", "explain", "active-passive.example.net", "--ecs", "202.12.27.0/24",
         "--down", "global-vip", "--dir", str(ZONES)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "chosen:   lb:ap-api-regional -> backup-asia-ne" in proc.stdout
    assert "answer:   203.0.113.31  ttl 30  ecs scope 24" in proc.stdout


def test_explain_rejects_unknown_names_to_mark_down() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dnsd", "explain", "www.example.test", "--down", "nosuch", "--dir", str(ZONES)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 2 and "no such pool or backend" in proc.stderr
