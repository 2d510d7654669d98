"""The config API: entries of the YAML directory created, changed and deleted
over HTTP, answered by `dig`, written to disk so `dnsd check` accepts them, guarded by
ETags, refused whole when invalid."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.admin_client import http
from tests.processes import DnsdProcess

TOKEN = "config-api-test-token"
ENV = {"DNSD_ADMIN_TOKEN": TOKEN}


def dig(port: int, name: str, qtype: str = "A") -> list[str]:
    out = subprocess.run(
        ["dig", "@127.0.0.1", "-p", str(port), name, qtype, "+short", "+tries=1", "+time=2"],
        capture_output=True, text=True, timeout=10, check=True,
    )  # fmt: skip
    return out.stdout.split()


def check(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dnsd", "check", str(directory)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_create_pool_lb_and_name_then_dig_answers_and_the_yaml_holds_them(
    config_copy: Path,
) -> None:
    before = (config_copy / "example.test.yaml").read_text()
    with DnsdProcess(config_copy, env=ENV) as dnsd:
        port, admin = dnsd.port, dnsd.admin_port
        pool = {"backends": [{"name": "a1", "address": "192.0.2.71"}], "region": "WEU"}
        status, body = http(admin, "PUT", "/api/v1/config/pools/api-new", pool, token=TOKEN)
        assert status == 201, body
        lb = {"default_pools": ["api-new"], "ttl": 20}
        assert http(admin, "PUT", "/api/v1/config/load_balancers/lb-new", lb, token=TOKEN)[0] == 201
        status, body = http(
            admin, "PUT", "/api/v1/config/zones/example.test/records/fresh", {"lb": "lb-new"}, token=TOKEN
        )  # fmt: skip
        assert status == 201, body
        assert dig(port, "fresh.example.test") == ["192.0.2.71"]
        # a static record too, and a backend added to the pool through its own route
        rec = {"A": ["192.0.2.81", "192.0.2.82"], "ttl": 60}
        assert http(admin, "PUT", "/api/v1/config/zones/example.test/records/static1", rec, token=TOKEN)[0] == 201  # fmt: skip
        assert sorted(dig(port, "static1.example.test")) == ["192.0.2.81", "192.0.2.82"]
        status, _ = http(admin, "PUT", "/api/v1/config/pools/api-new/backends/a2",
                         {"address": "192.0.2.72", "weight": 0}, token=TOKEN)  # fmt: skip
        assert status == 201
        status, got = http(admin, "GET", "/api/v1/config/pools/api-new", token=TOKEN)
        assert status == 200 and [b["name"] for b in got["backends"]] == ["a1", "a2"]
        # reads need a token, writes the admin scope
        assert http(admin, "GET", "/api/v1/config/pools/api-new")[0] == 401
        assert http(admin, "GET", "/api/v1/config/pools/nope", token=TOKEN)[0] == 404
        # DELETE removes the record: NXDOMAIN afterwards
        status, _ = http(admin, "DELETE", "/api/v1/config/zones/example.test/records/static1", token=TOKEN)  # fmt: skip
        assert status == 200 and dig(port, "static1.example.test") == []
        entries = http(admin, "GET", "/api/v1/audit", token=TOKEN)[1]["entries"]
        routes = [e["route"] for e in entries if e["route"].startswith("/api/v1/config/")]
        assert "/api/v1/config/pools/api-new" in routes
        created = next(e for e in entries if e["route"] == "/api/v1/config/pools/api-new")
        assert created["before"] == {"pools/api-new": None}
        assert created["after"]["pools/api-new"]["region"] == "WEU"
    text = (config_copy / "example.test.yaml").read_text()
    assert "fresh: {lb: lb-new}" in text and "api-new:" in text and "static1" not in text
    # comments and untouched entries are kept as written
    for line in before.splitlines():
        if "#" in line and "region_pools" not in line:
            assert line in text, line
    result = check(config_copy)
    assert result.returncode == 0, result.stderr


def test_stale_if_match_gets_412_and_invalid_change_gets_400_with_reasons(
    config_copy: Path,
) -> None:
    with DnsdProcess(config_copy, env=ENV) as dnsd:
        admin = dnsd.admin_port
        route = "/api/v1/config/pools/us-east"
        status, pool = http(admin, "GET", route, token=TOKEN)
        assert status == 200
        tag = _etag(admin, route)
        changed = {**pool, "weight": 3}
        assert http(admin, "PUT", route, changed, token=TOKEN, headers={"If-Match": tag})[0] == 200
        on_disk = (config_copy / "example.test.yaml").read_text()
        status, body = http(admin, "PUT", route, {**pool, "weight": 5}, token=TOKEN, headers={"If-Match": tag})  # fmt: skip
        assert status == 412 and "stale" in body["error"]
        assert (config_copy / "example.test.yaml").read_text() == on_disk
        # an undefined pool: 400, every reason with file:line, nothing written, still serving
        bad = {"default_pools": ["no-such-pool"], "fallback_pool": "nor-this"}
        status, body = http(admin, "PUT", "/api/v1/config/load_balancers/web", bad, token=TOKEN)
        assert status == 400
        assert any("example.test.yaml:" in e and "undefined pool 'no-such-pool'" in e for e in body["errors"])  # fmt: skip
        assert any("nor-this" in e for e in body["errors"])
        assert (config_copy / "example.test.yaml").read_text() == on_disk
        assert dig(dnsd.port, "www.example.test")  # the old config keeps serving
        # a body the checker refuses by shape, and a route that names nothing
        status, body = http(admin, "PUT", route, {"backends": "x", "colour": 1}, token=TOKEN)
        assert status == 400 and any("unknown key" in e for e in body["errors"])
        assert http(admin, "PUT", "/api/v1/config/zones/nowhere.test/records/a", {"A": "192.0.2.1"}, token=TOKEN)[0] == 404  # fmt: skip
        assert http(admin, "PUT", "/api/v1/config/widgets/x", {}, token=TOKEN)[0] == 404
        assert http(admin, "DELETE", "/api/v1/config/pools/never", token=TOKEN)[0] == 404


def test_two_writers_racing_on_one_pool_exactly_one_wins(config_copy: Path) -> None:
    with DnsdProcess(config_copy, env=ENV) as dnsd:
        admin = dnsd.admin_port
        route = "/api/v1/config/pools/eu-west"
        pool = http(admin, "GET", route, token=TOKEN)[1]
        tag = _etag(admin, route)
        results: list[int] = []
        start = threading.Barrier(2)

        def writer(weight: int) -> None:
            start.wait()
            body = {**pool, "weight": weight}
            results.append(
                http(admin, "PUT", route, body, token=TOKEN, headers={"If-Match": tag})[0]
            )

        threads = [threading.Thread(target=writer, args=(w,)) for w in (7, 9)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(results) == [200, 412]
        weight = http(admin, "GET", route, token=TOKEN)[1]["weight"]
        assert weight in (7, 9)


def test_change_set_is_all_or_nothing(config_copy: Path) -> None:
    with DnsdProcess(config_copy, env=ENV) as dnsd:
        admin = dnsd.admin_port
        good = {
            "method": "PUT",
            "route": "zones/example.test/records/x1",
            "body": {"A": "192.0.2.91"},
        }
        bad = {"method": "PUT", "route": "zones/example.test/records/x2", "body": {"lb": "missing"}}
        status, body = http(admin, "POST", "/api/v1/config/changes", {"changes": [good, bad]}, token=TOKEN)  # fmt: skip
        assert status == 400 and any("missing" in e for e in body["errors"])
        assert dig(dnsd.port, "x1.example.test") == []
        status, body = http(admin, "POST", "/api/v1/config/changes", {"changes": [good]}, token=TOKEN)  # fmt: skip
        assert status == 200 and dig(dnsd.port, "x1.example.test") == ["192.0.2.91"]
        everything = http(admin, "GET", "/api/v1/config", token=TOKEN)[1]
        assert everything["zones"]["example.test"]["records"]["x1"] == {"A": "192.0.2.91"}
        assert "us-east" in everything["pools"] and "web" in everything["load_balancers"]


def _etag(port: int, route: str) -> str:
    import urllib.request

    request = urllib.request.Request(f"http://127.0.0.1:{port}{route}")
    request.add_header("Authorization", f"Bearer {TOKEN}")
    with urllib.request.urlopen(request, timeout=5) as response:
        tag = response.headers["ETag"]
    assert tag and tag.startswith('"')
    return tag


SEED_ZONE = """\
zone: seed.test
soa: {mname: ns1.seed.test., rname: h.seed.test.}
records:
  "@": {NS: [ns1.seed.test.]}
  ns1: {A: 192.0.2.53}
"""


def test_a_zone_is_created_through_its_own_route_checked_scoped_and_audited(
    tmp_path: Path,
) -> None:
    zones = tmp_path / "zones"
    zones.mkdir()
    (zones / "seed.yaml").write_text(SEED_ZONE)
    (zones / "clash.test.yaml").write_text(SEED_ZONE.replace("seed.test", "other.test"))
    reader = "zone-reader-token"
    digest = hashlib.sha256(reader.encode()).hexdigest()
    server_file = tmp_path / "dnsd.yaml"
    server_file.write_text(f"tokens:\n  - {{name: reader, scope: read, sha256: {digest}}}\n")
    route = "/api/v1/config/zones/new.test"
    soa = {"mname": "ns1.new.test.", "rname": "ops.new.test.", "refresh": 600, "minimum": 30}
    with DnsdProcess(zones, "--config", str(server_file), env=ENV) as dnsd:
        admin = dnsd.admin_port
        files = sorted(p.name for p in zones.iterdir())

        def refused(status: int, path: str, body: Any, token: str = TOKEN) -> dict:
            got, answer = http(admin, "PUT", path, body, token=token)
            assert got == status, (path, got, answer)
            assert sorted(p.name for p in zones.iterdir()) == files  # nothing written
            return answer

        # who may: a write needs the admin scope
        assert http(admin, "PUT", route, {"soa": soa})[0] == 401
        refused(403, route, {"soa": soa}, token="nope")
        refused(403, route, {"soa": soa}, token=reader)
        # bad names, bad settings, a file that holds another zone: a clear 4xx, nothing written
        answer = refused(400, "/api/v1/config/zones/bad!name.test", {"soa": soa})
        assert "letters, digits" in answer["error"]
        answer = refused(400, route, {"soa": {"mname": "ns1.new.test."}})
        assert any('"rname"' in e and "new.test.yaml" in e for e in answer["errors"]), answer
        answer = refused(400, route, {"soa": soa, "records": {"www": {"A": "192.0.2.1"}}})
        assert "records" in answer["error"]
        answer = refused(400, route, {"soa": soa, "colour": "blue"})
        assert any("unknown key" in e for e in answer["errors"]), answer
        answer = refused(409, "/api/v1/config/zones/clash.test", {"soa": soa})
        assert "clash.test.yaml exists" in answer["error"]
        assert dig(dnsd.port, "new.test", "SOA") == []  # not served
        # created: its own file, served at once (SOA with dnsd's serial), records next
        status, answer = http(admin, "PUT", route, {"soa": soa, "ttl": 120}, token=TOKEN)
        assert status == 201, answer
        assert answer["etags"]["zones/new.test"]
        got = dig(dnsd.port, "new.test", "SOA")
        assert got[:2] == ["ns1.new.test.", "ops.new.test."] and got[3:] == ["600", "900", "1209600", "30"], got  # fmt: skip
        assert http(admin, "GET", route, token=reader) == (200, {"soa": soa, "ttl": 120})
        record = "/api/v1/config/zones/new.test/records/www"
        assert http(admin, "PUT", record, {"A": ["192.0.2.7"]}, token=TOKEN)[0] == 201
        assert dig(dnsd.port, "www.new.test") == ["192.0.2.7"]
        # settings replaced, records kept; no DELETE (a zone goes with its file, by hand)
        status, _ = http(admin, "PUT", route, {"soa": {**soa, "refresh": 1200}}, token=TOKEN)
        assert status == 200
        assert dig(dnsd.port, "new.test", "SOA")[3] == "1200"
        assert dig(dnsd.port, "www.new.test") == ["192.0.2.7"]
        assert http(admin, "DELETE", route, token=TOKEN)[0] == 405
        # audited (before: none) and a `config` event that names the change
        entries = http(admin, "GET", "/api/v1/audit", token=TOKEN)[1]["entries"]
        made = [e for e in entries if e["route"] == route and e["status"] == 201]
        assert made and made[0]["before"] == {"zones/new.test": None}, entries
        events = http(admin, "GET", "/api/v1/events?kind=config", token=TOKEN)[1]["events"]
        assert any(e["cause"] == "config API: PUT zones/new.test" for e in events), events
    text = (zones / "new.test.yaml").read_text()
    assert text.startswith("zone: new.test\nsoa: {mname: ns1.new.test.") and "www:" in text, text
    assert (zones / "clash.test.yaml").read_text() == SEED_ZONE.replace("seed.test", "other.test")
    result = check(zones)
    assert result.returncode == 0, result.stderr
