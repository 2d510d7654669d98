"""Round trip byte for byte: the rich zone (every record type, names with any
bytes, RFC 2317 labels, a TXT holding every byte value 0-255), as a zone file and as YAML
→ `dnsd serve` → AXFR by a real Knot secondary → `dnsd export` → `dnsd import` (YAML) →
`dnsd serve` again. At every step each record — owner, type, TTL and RDATA as wire bytes
— equals what dnspython reads from the original file, and each server answers every
RRset with the same bytes."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rdatatype
import dns.tsig
import dns.tsigkeyring
import dns.zone
import pytest

from dnsd.drill.ports import free_port_pair
from tests.processes import DnsdProcess
from tests.secondaries import Knot

pytestmark = pytest.mark.slow
DATA = Path(__file__).parent.parent / "data" / "rich"
YAML_SOURCE = Path(__file__).parent.parent / "data" / "rich-yaml"
ZONE = "rich.example."
SOA = dns.rdatatype.SOA
Record = tuple[bytes, int, int, bytes]  # owner (lower-case wire), type, TTL, RDATA wire


def records(zone: dns.zone.Zone) -> set[Record]:
    """Every record; the SOA with serial 0 (its serial is dnsd's to number)."""
    return {
        (name.canonicalize().to_wire(), int(rdata.rdtype), ttl,
         (rdata.replace(serial=0) if rdata.rdtype == SOA else rdata).to_wire())
        for name, ttl, rdata in zone.iterate_rdatas()
    }  # fmt: skip


def axfr(port: int, secret: str | None = None) -> set[Record]:
    keyring = dns.tsigkeyring.from_text({"xfr-key": secret}) if secret else None
    messages = dns.query.xfr("127.0.0.1", ZONE, port=port, keyring=keyring, keyname="xfr-key",
                             keyalgorithm=dns.tsig.HMAC_SHA256, lifetime=20, relativize=False)  # fmt: skip
    return records(dns.zone.from_xfr(messages, relativize=False))


def served(port: int, expected: set[Record]) -> int:
    """Ask for every RRset over TCP; each authoritative answer must hold exactly its
    records, byte for byte. Returns how many RRsets were compared (referrals are not)."""
    by_set: dict[tuple[bytes, int], set[Record]] = {}
    for record in expected:
        by_set.setdefault(record[:2], set()).add(record)
    compared = 0
    for (owner, rtype), want in by_set.items():
        name = dns.name.from_wire(owner, 0)[0]
        query = dns.message.make_query(name, rtype, use_edns=0)
        query.flags &= ~dns.flags.RD
        reply = dns.query.tcp(query, "127.0.0.1", port=port, timeout=5)
        if not reply.flags & dns.flags.AA:
            continue  # below a delegation (glue, the cut's NS): a referral
        got = {
            (
                r.name.canonicalize().to_wire(),
                int(r.rdtype),
                r.ttl,
                (rdata.replace(serial=0) if r.rdtype == SOA else rdata).to_wire(),
            )
            for r in reply.answer
            if r.name == name and r.rdtype == rtype
            for rdata in r
        }
        assert got == want, f"{name} {dns.rdatatype.to_text(rtype)}"  # fmt: skip
        compared += 1
    return compared


def run(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "dnsd", *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@dataclass
class Setup:
    config: Path
    secret: str
    port: int


def configure(directory: Path, secret: str, yaml_text: str, knot_port: int | None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "xfr.b64").write_text(secret + "\n")
    (directory / "keys.yaml").write_text(
        "tsig_keys:\n  xfr-key: {algorithm: hmac-sha256, secret_file: xfr.b64}\n"
    )
    extra = "\ntransfer:\n  allow: [127.0.0.1/32]\n  keys: [xfr-key]\n"
    if knot_port:
        extra += f'notify: ["127.0.0.1:{knot_port}"]\n'
    (directory / "rich.example.yaml").write_text(yaml_text + extra)


@pytest.fixture
def original() -> set[Record]:
    zone = dns.zone.from_file(str(DATA / "rich.example.zone"), origin=ZONE, relativize=False)
    found = records(zone)
    txt_bytes = {rdata for _, rtype, _, rdata in found if rtype == dns.rdatatype.TXT}
    assert any(set(range(256)) <= set(rdata) for rdata in txt_bytes)  # every byte value
    assert len({rtype for _, rtype, _, _ in found}) >= 25
    return found


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    secret = base64.b64encode(os.urandom(32)).decode()
    yield Setup(tmp_path, secret, free_port_pair())


def wait_for(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
                return
        except Exception:  # the secondary may not hold the zone yet
            pass
        time.sleep(0.1)
    raise AssertionError(what)


@pytest.mark.parametrize("source", ["zone file", "YAML"])
def test_every_record_survives_serve_axfr_export_import_serve(
    setup: Setup, original: set[Record], source: str
) -> None:
    """`source`: the rich zone as its RFC 1035 file, or as YAML written by hand
    (tests/data/rich-yaml: the same records in YAML's ways — relative names, plain TXT
    strings, an IDN owner in Unicode)."""
    first = setup.config / "first"
    knot = Knot(setup.config / "knot", setup.port, [ZONE], ("xfr-key", setup.secret),
                serve_transfers=True)  # fmt: skip
    if source == "YAML":
        configure(first, setup.secret, (YAML_SOURCE / "rich.example.yaml").read_text(), knot.port)
    else:
        configure(first, setup.secret, "zone: rich.example\nfile: rich.example.zone\n", knot.port)
        shutil.copy(DATA / "rich.example.zone", first / "rich.example.zone")
    state = setup.config / "state"
    with DnsdProcess(first, "--state-dir", str(state), listen=f"127.0.0.1:{setup.port}") as dnsd:
        # zone file → dnsd: served and transferred as written.
        assert served(dnsd.port, original) >= 40
        assert axfr(dnsd.port, setup.secret) == original
        # → a Knot secondary receives exactly that.
        with knot:
            wait_for(lambda: axfr(knot.port) == original, 20, "Knot holds the zone byte for byte")
        # → `dnsd export` prints it.
        exported = run("export", ZONE, "--dir", str(first), "--state-dir", str(state))
    zone = dns.zone.from_text(exported, origin=ZONE, relativize=False, check_origin=False)
    assert records(zone) == original
    # → `dnsd import` makes YAML of it → `dnsd serve` serves and transfers the same bytes.
    exported_file = setup.config / "exported.zone"
    exported_file.write_text(exported)
    imported = setup.config / "imported"
    run("import", str(exported_file), "--out", str(imported))
    yaml_text = (imported / "rich.example.yaml").read_text()
    configure(imported, setup.secret, yaml_text, None)
    with DnsdProcess(imported) as again:
        assert axfr(again.port, setup.secret) == original
        assert served(again.port, original) >= 40
    # → and exported once more: the same text as the first export (a fixed point).
    again_text = run("export", ZONE, "--dir", str(imported))
    assert records(dns.zone.from_text(again_text, origin=ZONE, relativize=False)) == original
