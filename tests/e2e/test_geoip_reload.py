"""GeoIP updates without a restart: geoipupdate writes a new database file and
renames it over the old one; a SIGHUP reopens it, logs its build date and the same client
subnet is placed — and answered — by the new data. A broken file is refused and the old
database kept."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.geo_fixture import write_city_db
from tests.processes import DnsdProcess

pytestmark = pytest.mark.slow

GEO_ZONE = """\
zone: geo.test
soa: {mname: ns1.geo.test., rname: h.geo.test.}
records:
  "@": {NS: ns1.geo.test.}
  ns1: {A: 192.0.2.53}
  www: {lb: www}
pools:
  europe: {backends: [{name: eu, address: 192.0.2.10}]}
  asia: {backends: [{name: as, address: 192.0.2.20}]}
load_balancers:
  www: {ttl: 5, steering: geo, default_pools: [europe, asia], region_pools: {WEU: [europe], NEAS: [asia]}}
"""


def answer(port: int) -> str:
    return subprocess.run(
        ["dig", "@127.0.0.1", "-p", str(port), "+short", "+subnet=81.2.69.0/24", "www.geo.test"],
        capture_output=True, text=True, timeout=10,
    ).stdout.strip()  # fmt: skip


def test_a_replaced_database_is_used_after_sighup_and_a_broken_one_refused(tmp_path: Path) -> None:
    zones = tmp_path / "zones"
    zones.mkdir()
    (zones / "geo.test.yaml").write_text(GEO_ZONE)
    database = tmp_path / "city.mmdb"
    write_city_db(database, {"81.2.69.0/24": ("GB", None, 51.5, -0.1)})  # WEU
    with DnsdProcess(zones, "--geoip", str(database), "--rrl-rate", "0") as dnsd:
        assert answer(dnsd.port) == "192.0.2.10"
        update = tmp_path / "city.mmdb.new"
        write_city_db(update, {"81.2.69.0/24": ("JP", None, 35.7, 139.7)})  # NEAS now
        os.replace(update, database)  # as geoipupdate does
        dnsd.signal(signal.SIGHUP)
        dnsd.wait_for_log("GeoIP database")  # the startup line, then:
        dnsd.wait_for_log("reopened")
        deadline = time.monotonic() + 5
        while answer(dnsd.port) != "192.0.2.20":
            assert time.monotonic() < deadline, dnsd.output
            time.sleep(0.1)
        broken = tmp_path / "broken.new"
        broken.write_bytes(b"not a maxmind database")
        os.replace(broken, database)
        dnsd.signal(signal.SIGHUP)
        dnsd.wait_for_log("cannot reopen")
        dnsd.wait_for_log("generation 3")
        assert answer(dnsd.port) == "192.0.2.20"  # the old (second) database still answers
