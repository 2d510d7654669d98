"""Client location end to end, through `dnsd serve` and `dig`: dynamic steering on a single node by
its own measured RTTs (real HTTP backends that delay their answers), a user's own database
for private and documentation ranges, `client_networks` before the database, and
`client_region: pop`."""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
from pathlib import Path

import pytest

from dnsd.drill.backend import DemoBackend
from tests.conftest import DATA
from tests.e2e.test_geo_ecs import answer_and_scope, dig
from tests.geo_fixture import FIXTURE, PRIVATE_FIXTURE, write_city_db
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess

THREE_REGIONS = ["81.2.69.0/24", "202.12.27.0/24", "8.8.8.0/24"]  # WEU, NEAS, WNAM

DYNAMIC = """\
zone: rtt.test
ttl: 300
soa: {mname: ns1.rtt.test., rname: hostmaster.rtt.test., minimum: 60}
records:
  "@": {NS: ns1.rtt.test.}
  ns1: {A: 192.0.2.53}
  www: {lb: www}
monitors:
  http: {type: http, path: /healthz, interval: 100ms, timeout: 1s}
pools:
  far: {monitor: http, backends: [{name: far-1, address: 127.0.0.12, port: %(far)d}]}
  near: {monitor: http, backends: [{name: near-1, address: 127.0.0.11, port: %(near)d}]}
load_balancers:
  www: {steering: dynamic, ttl: 5, default_pools: [far, near], min_samples: 3}
"""


@pytest.fixture(scope="module")
def city_db(tmp_path_factory) -> str:
    networks = {**FIXTURE, **PRIVATE_FIXTURE}
    return str(write_city_db(tmp_path_factory.mktemp("geo") / "city.mmdb", networks))


def test_single_node_without_sources_steers_every_region_to_the_pool_it_measures_fastest(
    tmp_path, city_db
) -> None:
    loop = LoopThread()
    try:
        near = loop.call(DemoBackend("near", host="127.0.0.11", control_port=None).start())
        far = loop.call(DemoBackend("far", host="127.0.0.12", control_port=None).start())
        for backend, delay_ms in ((near, 5.0), (far, 40.0)):
            backend.slow_ms = delay_ms
            loop.call(backend.set_mode("slow"))
        (tmp_path / "rtt.test.yaml").write_text(DYNAMIC % {"far": far.port, "near": near.port})
        with DnsdProcess(tmp_path, "--geoip", city_db) as proc:
            # Failover order would answer `far` (listed first): wait for the RTT profiles.
            deadline = time.monotonic() + 15
            answers: dict[str, list[str]] = {}
            while time.monotonic() < deadline:
                answers = {
                    s: answer_and_scope(dig(proc.port, "www.rtt.test", f"+subnet={s}"))[0]
                    for s in THREE_REGIONS
                }
                if all(a == ["127.0.0.11"] for a in answers.values()):
                    break
                time.sleep(0.2)
            assert all(a == ["127.0.0.11"] for a in answers.values()), answers
            url = f"http://127.0.0.1:{proc.admin_port}/api/v1/explain?name=www.rtt.test&client=202.12.27.9"
            with urllib.request.urlopen(url, timeout=5) as response:
                info = json.load(response)
            assert info["region"] == "NEAS" and info["rtt_source"] == "local"
            rtt = {c["pool"]: c["rtt_ms"] for c in info["candidates"]}
            assert rtt["near"] < rtt["far"] and rtt["far"] >= 40.0, rtt
            assert any("RTT measured from this node (local)" in line for line in info["trail"])
    finally:
        loop.close()


# -- where a client is: the user's database, client_networks, client_region: pop --------------
NETWORKS = """
client_networks:
  10.1.0.0/16: {region: WEU}            # beats the database's 10.0.0.0/8 (JP)
  192.0.2.128/25: {country: JP}         # beats the database's 192.0.2.0/24 (DE)
  "2001:db8:1::/48": {region: NEAS}
"""


@pytest.fixture(scope="module")
def geo_dir(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("zones")
    shutil.copy(DATA / "geo" / "geo.test.yaml", target)
    with (target / "geo.test.yaml").open("a") as f:
        f.write("    client_region: client\n")  # the www LB, written out
        f.write("  popped:\n    steering: geo\n    default_pools: [us]\n")
        f.write("    region_pools: {WEU: [eu], NEAS: [asia]}\n    client_region: pop\n")
        f.write(NETWORKS)
    text = (target / "geo.test.yaml").read_text()
    (target / "geo.test.yaml").write_text(
        text.replace("  www: {lb: www}", "  www: {lb: www}\n  pop: {lb: popped}")
    )
    return target


@pytest.fixture(scope="module")
def located_dnsd(geo_dir, city_db):
    with DnsdProcess(geo_dir, "--geoip", city_db, "--pop-region", "NEAS") as proc:
        yield proc


LOCATION_CASES = [
    # (subnet sent, expected address, echo subnet/source/scope)
    ("10.9.0.0/24", "203.0.113.10", "10.9.0.0/24/8"),  # the user's DB: 10/8 → JP → NEAS
    ("192.0.2.0/25", "198.51.100.20", "192.0.2.0/25/24"),  # the user's DB: DE (country pool)
    ("10.1.2.0/24", "198.51.100.10", "10.1.2.0/24/16"),  # client_networks /16 WEU beats the DB
    ("192.0.2.128/26", "203.0.113.10", "192.0.2.128/26/25"),  # client_networks JP → NEAS
    ("2001:db8:1:5::/64", "203.0.113.10", "2001:db8:1:5::/64/48"),  # IPv6 client_networks
    ("81.2.69.0/24", "198.51.100.10", "81.2.69.0/24/24"),  # public ranges still work
]


@pytest.mark.parametrize(("subnet", "address", "echo"), LOCATION_CASES)
def test_private_ranges_ask_the_database_and_client_networks_come_first(
    located_dnsd, subnet, address, echo
) -> None:
    assert answer_and_scope(dig(located_dnsd.port, "www.geo.test", f"+subnet={subnet}")) == (
        [address],
        echo,
    )


@pytest.mark.parametrize("subnet", ["81.2.69.0/24", "8.8.8.0/24", "10.1.2.0/24"])
def test_client_region_pop_puts_every_client_in_the_nodes_region(located_dnsd, subnet) -> None:
    # Node region NEAS → asia, whatever the client's own region; the answer did not depend
    # on the client's location: scope 0.
    addresses, scope = answer_and_scope(dig(located_dnsd.port, "pop.geo.test", f"+subnet={subnet}"))
    assert addresses == ["203.0.113.10"]
    assert scope is not None and scope.endswith("/0")


def test_explain_shows_the_client_network_that_placed_the_client(geo_dir, city_db) -> None:
    import subprocess

    out = subprocess.run(
        ["dnsd", "explain", "www.geo.test", "--dir", str(geo_dir), "--geoip", city_db,
         "--client", "10.1.7.7"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "region WEU" in out and "(client_networks 10.1.0.0/16)" in out
    assert "198.51.100.10" in out
