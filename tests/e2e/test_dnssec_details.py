"""Signed-zone details and random-name floods, judged by
real peers: delv and unbound (trust anchor: the zone's DS) validate a query for type NSEC
at names that exist, do not exist or are empty non-terminals, and nonexistent names of
254 and 255 octets; a CO=1 query gets NXDOMAIN with a compact NSEC whose signatures check
against the validated DNSKEY (no installed validator speaks CO yet: unbound 1.17 and delv
9.18 predate RFC 9824); NXNAME queries get FORMERR; a Knot secondary's AXFR equals dnsd's,
CDS and CDNSKEY included, and ldns-verify-zone accepts it; DNSViz (offline, loopback
only) finds no errors; and with `--rrl-rate 10` random DO=1 names are rate limited like
NXDOMAIN."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import dns.dnssec
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest

from dnsd.drill.ports import free_port_pair
from dnsd.drill.resolver import Unbound
from tests.e2e.test_dnssec import (
    ROOT,
    ZONE,
    Signed,
    anchor_file,
    delv,
    signed,
    signed_config,
    through,
)
from tests.processes import DnsdProcess
from tests.secondaries import _KnotServer

pytestmark = pytest.mark.slow
__all__ = ["signed"]  # the fixture, shared with test_dnssec.py
CO = 0x4000


def long_name(octets: int) -> str:
    """A name in ZONE of exactly `octets` octets on the wire."""
    apex = dns.name.from_text(ZONE)
    room = octets - len(apex.to_wire() or b"")
    labels = []
    while room > 64:
        size = 62 if room - 64 == 1 else 63  # never leave one octet: no label is that small
        labels.append(b"x" * size)
        room -= size + 1
    labels.append(b"x" * (room - 1))
    name = dns.name.Name([*labels, *apex.labels])
    assert len(name.to_wire() or b"") == octets
    return name.to_text()


def ask(port: int, name: str, qtype: str, co: bool = False) -> dns.message.Message:
    query = dns.message.make_query(name, qtype, want_dnssec=True)
    if co:
        query.use_edns(0, dns.flags.DO | CO, 1232)
    return dns.query.tcp(query, "127.0.0.1", port=port, timeout=5)


def validated_keys(port: int) -> dict[dns.name.Name, dns.rrset.RRset]:
    reply = ask(port, ZONE, "DNSKEY")
    dnskey = next(r for r in reply.answer if r.rdtype == dns.rdatatype.DNSKEY)
    rrsig = next(r for r in reply.answer if r.rdtype == dns.rdatatype.RRSIG)
    keys = {dns.name.from_text(ZONE): dnskey}
    dns.dnssec.validate(dnskey, rrsig, keys)
    return keys


def check_signatures(
    reply: dns.message.Message, keys: dict[dns.name.Name, dns.rrset.RRset]
) -> None:
    for section in (reply.answer, reply.authority):
        for rrset in section:
            if rrset.rdtype == dns.rdatatype.RRSIG:
                continue
            rrsig = next(r for r in section if r.rdtype == dns.rdatatype.RRSIG
                         and r.covers == rrset.rdtype and r.name == rrset.name)  # fmt: skip
            dns.dnssec.validate(rrset, rrsig, keys)


NSEC_CASES = [
    ("mail.example.test.", "NSEC"),  # a name with records: its NSEC
    ("nothere.example.test.", "NSEC"),  # no such name: the NSEC that says so, as an answer
    ("apps.example.test.", "NSEC"),  # an empty non-terminal: RRSIG NSEC only
    ("x.apps.example.test.", "NSEC"),  # a wildcard's name
    ("mail.example.test.", "RRSIG"),  # NODATA whose bitmap leaves RRSIG out
    (long_name(254), "A"),
    (long_name(255), "A"),
    (long_name(255), "NSEC"),
    (long_name(254), "TXT"),
]


def test_validators_accept_nsec_queries_and_the_longest_names(
    signed: Signed, tmp_path: Path
) -> None:
    anchor = anchor_file(tmp_path, signed.ds)
    keys = validated_keys(signed.dnsd.port)
    resolver = asyncio.run(Unbound(ZONE, signed.dnsd.port, signed.ds).start())
    try:
        for name, qtype in NSEC_CASES:
            direct = ask(signed.dnsd.port, name, qtype)
            assert direct.rcode() == dns.rcode.NOERROR, (name, qtype, direct)
            check_signatures(direct, keys)
            if qtype == "NSEC":  # the answer is the NSEC at the name, listing NSEC itself
                nsec = next(r for r in direct.answer if r.rdtype == dns.rdatatype.NSEC)
                assert nsec.name == dns.name.from_text(name) and " NSEC" in nsec.to_text()
            rcode, ad, answer = through(resolver.port, name, qtype)
            assert rcode == "NOERROR" and ad, (name, qtype, rcode, answer)
            out = delv(signed.dnsd.port, anchor, name, qtype)
            assert "fully validated" in out, (name, qtype, out)
    finally:
        resolver.stop()


def test_co_flag_gets_nxdomain_with_a_compact_nsec_that_checks(signed: Signed) -> None:
    port = signed.dnsd.port
    keys = validated_keys(port)
    for name in ("nothere.example.test.", long_name(255)):
        reply = ask(port, name, "A", co=True)
        assert reply.rcode() == dns.rcode.NXDOMAIN and reply.ednsflags & CO, reply
        check_signatures(reply, keys)
        nsec = next(r for r in reply.authority if r.rdtype == dns.rdatatype.NSEC)
        assert nsec.name == dns.name.from_text(name)
        assert "NXNAME" in nsec.to_text() and nsec[0].next > nsec.name
        plain = ask(port, name, "A")  # without CO: compact denial, NOERROR (RFC 9824 §3)
        assert plain.rcode() == dns.rcode.NOERROR and not plain.ednsflags & CO
    nodata = ask(port, "mail.example.test.", "TXT", co=True)  # a name that exists: NODATA
    assert nodata.rcode() == dns.rcode.NOERROR and nodata.ednsflags & CO


def test_nxname_queries_get_formerr(signed: Signed) -> None:
    for do in (True, False):
        query = dns.message.make_query("nothere.example.test.", 128, want_dnssec=do)
        reply = dns.query.udp(query, "127.0.0.1", port=signed.dnsd.port, timeout=5)
        assert reply.rcode() == dns.rcode.FORMERR, reply


def axfr_lines(port: int) -> list[str]:
    out = subprocess.run(
        ["kdig", "@127.0.0.1", "-p", str(port), "AXFR", ZONE, "+noall", "+answer"],
        capture_output=True, text=True, timeout=20,
    ).stdout  # fmt: skip
    return sorted({line for line in out.splitlines() if line and not line.startswith(";")})


def test_a_knot_secondary_transfers_the_signed_zone_whole(tmp_path: Path) -> None:
    config, state = signed_config(tmp_path), tmp_path / "state"
    port = free_port_pair()
    knot = _KnotServer(tmp_path / "knot")
    knot.write_config(
        f"remote:\n  - id: primary\n    address: 127.0.0.1@{port}\n"
        "acl:\n  - id: out\n    address: 127.0.0.1\n    action: transfer\n",
        "    zonefile-load: none\n",
        [f"  - domain: {ZONE}\n    master: primary\n    acl: out"],
    )
    with DnsdProcess(config, "--state-dir", str(state), "--rrl-rate", "0",
                     listen=f"127.0.0.1:{port}"), knot:  # fmt: skip
        deadline = time.monotonic() + 20
        while not (theirs := axfr_lines(knot.port)):
            assert time.monotonic() < deadline, knot.log.read_text()
            time.sleep(0.2)
        ours = axfr_lines(port)
    assert theirs == ours
    types = {line.split()[3] for line in ours}
    assert {"CDS", "CDNSKEY", "DNSKEY", "NSEC", "RRSIG"} <= types, types
    transferred = tmp_path / "knot.zone"
    transferred.write_text("\n".join(theirs) + "\n")
    done = subprocess.run(["ldns-verify-zone", str(transferred)], capture_output=True, text=True)
    assert done.returncode == 0 and "verified" in done.stdout, (done.stdout, done.stderr)


def flood(port: int, names: list[str], source: str, do: bool) -> list[dns.message.Message]:
    """Send every name once, about 1,000 a second, and collect what comes back."""
    replies = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.bind((source, 0))
        for name in names:
            sock.sendto(dns.message.make_query(name, "A", want_dnssec=do).to_wire(),
                        ("127.0.0.1", port))  # fmt: skip
            time.sleep(0.001)
        sock.settimeout(1.0)
        try:
            while True:
                replies.append(dns.message.from_wire(sock.recv(4096)))
        except TimeoutError:
            pass
    return replies


def test_random_do_names_are_rate_limited_like_nxdomain(tmp_path: Path) -> None:
    """Compact denial answers a nonexistent name NOERROR, yet for rate limiting it is an
    NXDOMAIN: random DO=1 names share the NXDOMAIN bucket instead of escaping it."""
    config, state = signed_config(tmp_path), tmp_path / "state"
    rng = random.Random(31)
    with DnsdProcess(config, "--state-dir", str(state), "--rrl-rate", "10") as dnsd:
        for do, source in ((True, "127.0.1.1"), (False, "127.0.2.1")):
            names = [f"r{rng.getrandbits(48):x}.{ZONE}" for _ in range(400)]
            started = time.monotonic()
            replies = flood(dnsd.port, names, source, do)
            elapsed = time.monotonic() - started
            full = [r for r in replies if not r.flags & dns.flags.TC]
            # The bucket: 10 at once, then 10 a second, while the flood lasts.
            assert 10 <= len(full) <= 10 + 10 * elapsed + 5, (do, len(full), elapsed)
            assert len(replies) - len(full) >= 100  # slips: every second limited reply
            if do:  # the answers that went out are compact denial, signed
                nsec = next(r for r in full[0].authority if r.rdtype == dns.rdatatype.NSEC)
                assert full[0].rcode() == dns.rcode.NOERROR and "NXNAME" in nsec.to_text()


VIZ_ZONE = """\
zone: viz.test
ttl: 3600
soa: {mname: ns1.viz.test., rname: hostmaster.viz.test., minimum: 300}
dnssec: {algorithm: 13}
records:
  "@": {NS: ns1.viz.test., MX: ["10 mail.viz.test."], TXT: ["v=spf1 -all"]}
  ns1: {A: 127.0.0.1}
  mail: {A: 192.0.2.25, AAAA: "2001:db8::25"}
  "*.apps": {A: 192.0.2.99}
  docs: {CNAME: mail.viz.test.}
  a.b: {A: 192.0.2.1}
"""
# On loopback the name server's address is a private one (in the glue and in the zone),
# which DNSViz reports whatever the zone holds; nothing else is excused.
LOOPBACK_ONLY = {"GLUE_PRIVATE_IP", "NS_NAME_PRIVATE_IP"}


def test_dnsviz_finds_no_errors(tmp_path: Path) -> None:
    """DNSViz, run offline in a network namespace with loopback only (`unshare -n`),
    probes a signed zone through dnsd: existing names, a wildcard, a CNAME, an empty
    non-terminal, nonexistent names (one of 255 octets)."""
    config, state = tmp_path / "zones", tmp_path / "state"
    config.mkdir()
    (config / "viz.test.yaml").write_text(VIZ_ZONE)
    names = ["viz.test.", "mail.viz.test.", "x.apps.viz.test.", "docs.viz.test.", "b.viz.test.",
             "nothere.viz.test.", "x" * 60 + "." + "y" * 60 + ".viz.test."]  # fmt: skip
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-m", "tests.e2e.dnsviz_offline", str(config),
         str(state), "viz.test.", *names],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert [item for item in found if item[1] not in LOOPBACK_ONLY] == [], found
    assert {item[1] for item in found} == LOOPBACK_ONLY  # DNSViz did look (and judge)
