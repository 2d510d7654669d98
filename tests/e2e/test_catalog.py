"""RFC 9432 catalog zones against real peers: `dig` reads the catalog `dnsd serve` makes
(queries over UDP and TCP, a TSIG-signed AXFR), and a real Knot secondary configured with
only that catalog (`catalog-role: interpret`) provisions and serves every member zone by
itself, adds a zone added to dnsd within 10 s of the reload and drops a removed one."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.name
import pytest

from dnsd.drill.ports import free_port_pair
from tests.admin_client import http
from tests.processes import DnsdProcess
from tests.secondaries import BindCatalog, KnotCatalog

pytestmark = pytest.mark.slow
TOKEN = "catalog-test-token"
CATALOG = "catalog.example."


@dataclass
class Setup:
    dnsd: DnsdProcess
    knot: KnotCatalog
    bind: BindCatalog
    config: Path
    secret: str


def member_id(zone: str) -> str:
    return hashlib.sha1(dns.name.from_text(zone).to_wire()).hexdigest()


def dig(port: int, *args: str) -> str:
    argv = ["dig", "@127.0.0.1", "-p", str(port), "+time=2", "+tries=1", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout


def soa_serial(port: int, zone: str) -> int | None:
    out = dig(port, "+short", zone, "SOA").split()
    return int(out[2]) if len(out) >= 3 and out[2].isdigit() else None


def records(text: str) -> set[str]:
    """dig's record lines, normalised (name TTL class type data), without TSIG."""
    out = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and not line.startswith(";") and fields[3] != "TSIG":
            out.add(" ".join(fields))
    return out


def wait_for(check: object, timeout: float, what: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():  # type: ignore[operator]
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout}s")


def zone_status(knot: KnotCatalog, zone: str) -> str:
    """`knotc zone-status`: Knot's own account of a zone, with the catalog and group it
    came from (`catalog: CATALOG#GROUP`)."""
    argv = ["knotc", "-c", str(knot.dir / "knot.conf"), "zone-status", zone]
    return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout


def member(name: str, notify: str, extra: str = "") -> str:
    return (
        f"zone: {name}\nsoa: {{mname: ns.{name}, rname: hostmaster.{name}}}\n"
        f'records:\n  "@": {{NS: ns.{name}}}\n  ns: {{A: 192.0.2.53}}\n'
        f"  www: {{A: 192.0.2.80}}\n"
        "transfer: {allow: [127.0.0.1/32], keys: [xfr-key]}\n"
        f"notify: {notify}\n" + extra
    )


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    secret = base64.b64encode(os.urandom(32)).decode()
    config = tmp_path / "zones"
    config.mkdir()
    (config / "xfr.b64").write_text(secret + "\n")
    (config / "keys.yaml").write_text(
        "tsig_keys:\n  xfr-key: {algorithm: hmac-sha256, secret_file: xfr.b64}\n"
    )
    port = free_port_pair()
    knot = KnotCatalog(tmp_path / "knot", port, CATALOG, ("xfr-key", secret))
    bind = BindCatalog(tmp_path / "bind", port, CATALOG, ("xfr-key", secret))
    notify = f'["127.0.0.1:{knot.port}", "127.0.0.1:{bind.port}"]'  # each test starts one
    (config / "a.example.yaml").write_text(
        member("a.example.", notify, "catalog_group: eu-primary\n")
    )
    (config / "b.example.yaml").write_text(member("b.example.", notify))
    (config / "internal.example.yaml").write_text(  # no transfer: not in the catalog
        "zone: internal.example.\nsoa: {mname: ns.internal.example., rname: h.internal.example.}\n"
        'records:\n  "@": {NS: ns.internal.example.}\n'
    )
    (config / "catalog.yaml").write_text(
        f"zone: {CATALOG}\ncatalog: {{members: all}}\n"
        "transfer: {allow: [127.0.0.1/32], keys: [xfr-key]}\n"
        f"notify: {notify}\n"
    )
    env = {"DNSD_ADMIN_TOKEN": TOKEN}
    with DnsdProcess(config, listen=f"127.0.0.1:{port}", env=env) as dnsd:
        yield Setup(dnsd, knot, bind, config, secret)
    knot.stop()
    bind.stop()


def test_dig_reads_the_catalog_over_udp_tcp_and_a_signed_axfr(setup: Setup) -> None:
    port, a, b = setup.dnsd.port, member_id("a.example."), member_id("b.example.")
    assert dig(port, "+short", f"version.{CATALOG}", "TXT").split() == ['"2"']
    assert dig(port, "+short", "+tcp", f"{a}.zones.{CATALOG}", "PTR").split() == ["a.example."]
    assert dig(port, "+short", CATALOG, "NS").split() == ["invalid."]
    serial = soa_serial(port, CATALOG)
    assert serial is not None
    axfr = records(dig(port, "-y", f"hmac-sha256:xfr-key:{setup.secret}", CATALOG, "AXFR"))
    assert axfr == {
        f"{CATALOG} 3600 IN SOA invalid. invalid. {serial} 3600 600 2419200 0",
        f"{CATALOG} 3600 IN NS invalid.",
        f'version.{CATALOG} 3600 IN TXT "2"',
        f"{a}.zones.{CATALOG} 3600 IN PTR a.example.",
        f'group.{a}.zones.{CATALOG} 3600 IN TXT "eu-primary"',
        f"{b}.zones.{CATALOG} 3600 IN PTR b.example.",
    }
    # The catalog is transferred under its own transfer: ACL, like any zone.
    assert "Transfer failed" in dig(port, CATALOG, "AXFR")


def test_knot_provisions_the_members_and_follows_reloads(setup: Setup) -> None:
    dnsd, knot = setup.dnsd, setup.knot
    with knot:
        # Knot knows only the catalog; it adds both members and transfers them from dnsd.
        for zone in ("a.example.", "b.example."):
            serial = soa_serial(dnsd.port, zone)
            wait_for(lambda z=zone, n=serial: soa_serial(knot.port, z) == n, 15,
                     f"knot serves {zone} from the catalog")  # fmt: skip
        assert dig(knot.port, "+short", "www.a.example.").split() == ["192.0.2.80"]
        # Knot read each member's group property (`catalog_group`), and b has none.
        assert f"catalog: {CATALOG}#eu-primary |" in zone_status(knot, "a.example.")
        assert f"catalog: {CATALOG} |" in zone_status(knot, "b.example.")
        assert soa_serial(knot.port, "internal.example.") is None

        # A zone added to dnsd's config: the reload raises the catalog serial, NOTIFY tells
        # Knot, and Knot adds and serves the new member within 10 s.
        before = soa_serial(dnsd.port, CATALOG)
        (setup.config / "c.example.yaml").write_text(
            member("c.example.", f'["127.0.0.1:{knot.port}"]')
        )
        status, body = http(dnsd.admin_port, "POST", "/api/v1/reload", token=TOKEN)
        assert status == 200, body
        after = soa_serial(dnsd.port, CATALOG)
        assert before is not None and after is not None and after > before
        took = wait_for(lambda: soa_serial(knot.port, "c.example.") is not None, 10,
                        "knot adds c.example. from the catalog")  # fmt: skip
        assert dig(knot.port, "+short", "www.c.example.").split() == ["192.0.2.80"]

        # A zone created through the config API joins the catalog at once, with its group.
        soa = {"mname": "ns.d.example.", "rname": "hostmaster.d.example."}
        zone = {"soa": soa, "transfer": {"allow": ["127.0.0.1/32"], "keys": ["xfr-key"]},
                "notify": [f"127.0.0.1:{knot.port}"], "catalog_group": "from-api"}  # fmt: skip
        status, body = http(dnsd.admin_port, "PUT", "/api/v1/config/zones/d.example", zone,
                            token=TOKEN)  # fmt: skip
        assert status == 201, body
        group = f"group.{member_id('d.example.')}.zones.{CATALOG}"
        assert dig(dnsd.port, "+short", group, "TXT").split() == ['"from-api"']
        wait_for(lambda: soa_serial(knot.port, "d.example.") == soa_serial(dnsd.port, "d.example."),
                 10, "knot adds d.example. made through the config API")  # fmt: skip
        assert f"catalog: {CATALOG}#from-api |" in zone_status(knot, "d.example.")

        # A zone removed from dnsd's config: Knot drops it (and keeps the others).
        (setup.config / "b.example.yaml").unlink()
        status, body = http(dnsd.admin_port, "POST", "/api/v1/reload", token=TOKEN)
        assert status == 200, body
        wait_for(lambda: "status: REFUSED" in dig(knot.port, "b.example.", "SOA"), 10,
                 "knot drops b.example.")  # fmt: skip
        assert soa_serial(knot.port, "a.example.") is not None
        print(f"knot served the added member {took:.2f}s after the reload")


def test_bind_provisions_the_members_and_follows_reloads(setup: Setup) -> None:
    """The same with BIND 9's `catalog-zones`: a second reader of RFC 9432."""
    dnsd, bind = setup.dnsd, setup.bind
    with bind:
        for zone in ("a.example.", "b.example."):
            serial = soa_serial(dnsd.port, zone)
            wait_for(lambda z=zone, n=serial: soa_serial(bind.port, z) == n, 15,
                     f"named serves {zone} from the catalog")  # fmt: skip
        assert dig(bind.port, "+short", "www.b.example.").split() == ["192.0.2.80"]
        (setup.config / "c.example.yaml").write_text(
            member("c.example.", f'["127.0.0.1:{bind.port}"]')
        )
        (setup.config / "b.example.yaml").unlink()
        status, body = http(dnsd.admin_port, "POST", "/api/v1/reload", token=TOKEN)
        assert status == 200, body
        wait_for(lambda: soa_serial(bind.port, "c.example.") is not None, 10,
                 "named adds c.example. from the catalog")  # fmt: skip
        wait_for(lambda: "status: REFUSED" in dig(bind.port, "b.example.", "SOA"), 10,
                 "named drops b.example.")  # fmt: skip
        assert soa_serial(bind.port, "a.example.") is not None
