"""The GeoIP database's age: a database older than 60 days is a WARNING at start (with its
build date and how to give a newer one) and `/api/v1/status` says its build date and age;
`dnsd geoip lookup IP` places an address with the server's own locate code."""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
import sys
from pathlib import Path

from dnsd.geo.database import GeoDatabase
from dnsd.geo.locate import locate
from dnsd.geo.regions import region_table
from tests.admin_client import http
from tests.conftest import DATA
from tests.geo_fixture import FIXTURE, PRIVATE_FIXTURE, write_city_db
from tests.processes import DnsdProcess

NETWORKS = "\nclient_networks:\n  10.1.0.0/16: {region: WEU}\n"


def dnsd(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dnsd", *args], capture_output=True, text=True,
                          timeout=30, cwd=cwd)  # fmt: skip


def test_the_embedded_2019_database_is_a_warning_and_in_the_status() -> None:
    with DnsdProcess(DATA / "good") as server:
        warning = [line for line in server.lines if "WARNING" in line and "GeoIP" in line]
        assert len(warning) == 1, server.output
        assert "built 2019-12-24" in warning[0] and "--geoip FILE" in warning[0]
        status, body = http(server.admin_port, "GET", "/api/v1/status")
    assert status == 200
    geoip = body["geoip"]
    assert geoip["build_date"] == "2019-12-24" and geoip["stale"] is True
    assert geoip["age_days"] > 60 and geoip["type"] == "GeoLite2-City"


def test_a_fresh_database_is_no_warning(tmp_path: Path) -> None:
    db = write_city_db(tmp_path / "city.mmdb")
    with DnsdProcess(DATA / "good", "--geoip", str(db)) as server:
        assert not [line for line in server.lines if "WARNING" in line and "GeoIP" in line]
        assert any("INFO" in line and "GeoIP database" in line for line in server.lines)
        status, body = http(server.admin_port, "GET", "/api/v1/status")
    assert status == 200
    assert body["geoip"]["stale"] is False and body["geoip"]["age_days"] <= 1
    assert body["geoip"]["path"] == str(db)


def test_lookup_places_addresses_as_the_server_does(tmp_path: Path) -> None:
    embedded = GeoDatabase()
    for address in ("81.2.69.160", "8.8.8.8", "2a00:1450::1", "85.214.1.1"):
        done = dnsd("geoip", "lookup", address, "--json", cwd=tmp_path)  # no zones/ there
        assert done.returncode == 0, done.stderr
        info = json.loads(done.stdout)
        loc = locate(ipaddress.ip_address(address), embedded, region_table(), None, None)
        assert (info["region"], info["country"], info["subdivision"], info["source"]) == (
            loc.region, loc.country, loc.subdivision, loc.source,
        )  # fmt: skip
        assert info["database"]["build_date"] == "2019-12-24" and info["config"] is None


def test_lookup_takes_the_configs_client_networks_and_the_node(tmp_path: Path) -> None:
    db = write_city_db(tmp_path / "city.mmdb", {**FIXTURE, **PRIVATE_FIXTURE})
    zones = tmp_path / "zones"
    zones.mkdir()
    shutil.copy(DATA / "geo" / "geo.test.yaml", zones)
    with (zones / "geo.test.yaml").open("a") as f:
        f.write(NETWORKS)
    args = ("--geoip", str(db), "--node", "fra1")
    text = dnsd("geoip", "lookup", "10.1.2.3", *args, cwd=tmp_path).stdout  # zones/ by default
    assert "region:      WEU" in text and "pop:         fra1" in text
    assert "placed by:   client_networks 10.1.0.0/16" in text
    info = json.loads(dnsd("geoip", "lookup", "10.9.9.9", *args, "--dir", str(zones),
                           "--json").stdout)  # fmt: skip
    assert (info["region"], info["country"], info["source"]) == ("NEAS", "JP", "geoip")
    assert info["database"]["stale"] is False
