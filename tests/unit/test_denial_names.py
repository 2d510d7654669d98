"""A signed NODATA names the types its owner has (the NSEC bitmap of compact denial),
also for owners with bytes outside letters, digits and `-_*` (`!`, an escaped dot, a
space): the denial reads the query name as the zone lookup does (one wire-name reader,
dnsd.dnsname), not in a form of its own that no zone key matches."""

from __future__ import annotations

import ipaddress
import random
from pathlib import Path

import dns.message
import dns.name
import dns.rdatatype
import pytest

from dnsd.dnssec.apex import with_keys
from dnsd.dnssec.keys import ensure_keys
from dnsd.fastpath import AnswerCache
from dnsd.health.view import view_of
from dnsd.loading import load_snapshot
from dnsd.reply import Client
from dnsd.request import Request
from dnsd.resolve import resolve

ZONE = """zone: odd.test
soa: {mname: ns1.odd.test., rname: h.odd.test.}
dnssec: {algorithm: 13}
records:
  "@": {NS: ns1.odd.test.}
  ns1: {A: 192.0.2.1}
  plain: {A: 192.0.2.2}
  "bang!": {A: 192.0.2.3}
  'a\\.b': {A: 192.0.2.4}
  'sp\\032ace': {A: 192.0.2.5}
  "Up~": {A: 192.0.2.6}
"""


@pytest.mark.parametrize("owner", ["plain", "bang!", "a\\.b", "sp\\032ace", "up~", "UP~"])
def test_nodata_bitmaps_hold_the_owners_types(owner: str, tmp_path: Path) -> None:
    config = tmp_path / "zones"
    config.mkdir()
    (config / "odd.test.yaml").write_text(ZONE)
    snap = load_snapshot(config, 1)
    snap = with_keys(snap, {z: ensure_keys(tmp_path / "keys", z, 13, True) for z in snap.zones})
    name = dns.name.from_text(owner, dns.name.from_text("odd.test."))
    query = dns.message.make_query(name, "TXT", want_dnssec=True)
    client = Client(ipaddress.ip_address("127.0.0.1"), "udp")
    asked, health = query.to_wire(), view_of({})
    wire = resolve(Request(asked, client, snap, health, random.Random(1), 1e9))
    assert wire is not None
    cached = AnswerCache().answer(asked, client, snap, health, random.Random(1), 1e9)
    assert cached == wire  # the answer cache's path: the same bytes
    reply = dns.message.from_wire(wire)
    assert reply.rcode() == 0 and not reply.answer
    nsecs = [r for r in reply.authority if r.rdtype == dns.rdatatype.NSEC]
    assert len(nsecs) == 1 and nsecs[0].name == name
    types = {t for window in nsecs[0][0].windows for t in _types(window)}
    assert dns.rdatatype.A in types and dns.rdatatype.TXT not in types


def _types(window: tuple[int, bytes]) -> list[int]:
    number, bits = window
    return [
        number * 256 + i * 8 + j
        for i, byte in enumerate(bits)
        for j in range(8)
        if byte & (0x80 >> j)
    ]
