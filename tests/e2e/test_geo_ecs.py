"""Geo steering over UDP with EDNS Client Subnet, located by a test-built MaxMind DB."""

from __future__ import annotations

import ipaddress
import re
import subprocess

import pytest

from dnsd.geo.database import GeoDatabase
from dnsd.geo.locate import locate
from dnsd.geo.regions import region_table
from tests.conftest import DATA
from tests.geo_fixture import write_city_db
from tests.processes import DnsdProcess


@pytest.fixture(scope="module")
def city_db(tmp_path_factory) -> str:
    return str(write_city_db(tmp_path_factory.mktemp("geo") / "city.mmdb"))


@pytest.fixture(scope="module")
def dnsd(city_db):
    with DnsdProcess(DATA / "geo", "--geoip", city_db) as proc:
        yield proc


def dig(port: int, *args: str) -> str:
    cmd = ["dig", "@127.0.0.1", "-p", str(port), "+tries=1", "+time=2", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout


def answer_and_scope(out: str) -> tuple[list[str], str | None]:
    addresses = re.findall(r"\tIN\tA+\t(\S+)", out)
    scope = re.search(r"CLIENT-SUBNET: (\S+)", out)
    return addresses, scope.group(1) if scope else None


ECS_CASES = [
    # (subnet sent, expected address, echoed subnet/source/scope)
    ("81.2.69.0/24", "198.51.100.10", "81.2.69.0/24/24"),  # GB → WEU → eu
    ("202.12.27.0/24", "203.0.113.10", "202.12.27.0/24/24"),  # JP → NEAS → asia
    ("91.198.174.0/24", "198.51.100.20", "91.198.174.0/24/16"),  # DE country beats WEU; DB net /16
    ("8.8.8.0/24", "192.0.2.15", "8.8.8.0/24/24"),  # US-CA → WNAM
    ("9.9.9.0/24", "192.0.2.10", "9.9.9.0/24/24"),  # US, no subdivision: ENAM → default
    ("81.2.69.128/25", "198.51.100.10", "81.2.69.128/25/24"),  # scope never above the DB net
]


@pytest.mark.parametrize(("subnet", "address", "echo"), ECS_CASES)
def test_ecs_subnet_gets_its_region_pool_and_scope(dnsd, subnet, address, echo) -> None:
    addresses, scope = answer_and_scope(dig(dnsd.port, "www.geo.test", f"+subnet={subnet}"))
    assert addresses == [address]
    assert scope == echo


def test_ecs_over_ipv6(dnsd) -> None:
    addresses, scope = answer_and_scope(
        dig(dnsd.port, "www.geo.test", "+subnet=2a00:1450:4000::/48")
    )
    assert addresses == ["198.51.100.10"]
    assert scope == "2a00:1450:4000::/48/32"


def test_static_answers_echo_scope_zero(dnsd) -> None:
    addresses, scope = answer_and_scope(dig(dnsd.port, "static.geo.test", "+subnet=81.2.69.0/24"))
    assert addresses == ["192.0.2.80"] and scope == "81.2.69.0/24/0"


def test_without_ecs_the_source_address_is_used(dnsd) -> None:
    # The source is 127.0.0.1: private, so no database lookup and no pop_region → defaults.
    addresses, scope = answer_and_scope(dig(dnsd.port, "www.geo.test"))
    assert addresses == ["192.0.2.10"] and scope is None


def test_ecs_source_prefix_zero_means_use_the_source_address(dnsd) -> None:
    addresses, scope = answer_and_scope(dig(dnsd.port, "www.geo.test", "+subnet=0.0.0.0/0"))
    assert addresses == ["192.0.2.10"]
    assert scope == "0.0.0.0/0/0"


def test_malformed_ecs_is_formerr(dnsd) -> None:
    from dnslib import EDNS0, RCODE, DNSRecord, EDNSOption

    from tests.dnsclient import udp_raw

    for data in (
        b"\x00\x01\x18",
        b"\x00\x03\x18\x00\x01\x02\x03",
        b"\x00\x01\x18\x00\x51\x02\x45\x01",
        b"\x00\x01\x18\x05\x51\x02\x45",
    ):
        q = DNSRecord.question("www.geo.test")
        q.add_ar(EDNS0(udp_len=1232, opts=[EDNSOption(8, data)]))
        reply = DNSRecord.parse(udp_raw(dnsd.port, q.pack()))
        assert reply.header.rcode == RCODE.FORMERR, data
    assert answer_and_scope(dig(dnsd.port, "www.geo.test", "+subnet=81.2.69.0/24"))[0] == [
        "198.51.100.10"
    ]


def test_pop_region_locates_clients_the_database_cannot(city_db) -> None:
    with DnsdProcess(DATA / "geo", "--geoip", city_db, "--pop-region", "NEAS") as proc:
        addresses, _ = answer_and_scope(dig(proc.port, "www.geo.test"))
        assert addresses == ["203.0.113.10"]


def test_ipv4_mapped_addresses_are_normalised(city_db) -> None:
    db = GeoDatabase(city_db)
    loc = locate(ipaddress.ip_address("::ffff:81.2.69.142"), db, region_table(), None)
    assert (loc.country, loc.region) == ("GB", "WEU")


def test_country_database_works_too(tmp_path) -> None:
    import json

    from mmdb_writer import MMDBWriter
    from netaddr import IPSet

    from tests.geo_fixture import FIXTURE

    writer = MMDBWriter(ip_version=6, ipv4_compatible=True, database_type="GeoLite2-Country")
    for network, (country, *_rest) in FIXTURE.items():
        writer.insert_network(IPSet([network]), {"country": {"iso_code": country}})
    path = tmp_path / "country.mmdb"
    writer.to_db_file(str(path))
    proc = subprocess.run(
        ["dnsd", "explain", "www.geo.test", "--dir", str(DATA / "geo"), "--geoip", str(path), "--client", "202.12.27.33", "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    info = json.loads(proc.stdout)
    assert (info["country"], info["region"], info["answer"]) == ("JP", "NEAS", ["203.0.113.10"])
