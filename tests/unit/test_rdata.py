"""RDATA and names held one way: dnspython reads every value once, the zone tree
keys names in dnspython's escaped form, DNAME synthesises CNAMEs (RFC 6672), and a bad
record is a config error naming file:line: path."""

from __future__ import annotations

from pathlib import Path

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import pytest
from dnslib import QTYPE, RCODE

from dnsd.config.loader import check_directory, load_config
from dnsd.dnsname import escape_label, is_below_or_at, key_of_labels, labels, parent, to_label
from dnsd.errors import ConfigError
from dnsd.rdata import to_wire
from dnsd.snapshot import compile_snapshot
from dnsd.zone_lookup import lookup

# The third-wave example of the configuration manual, plus names with other bytes.
SPEC_ZONE = r"""
zone: example.test
soa: {mname: ns1.example.test., rname: hostmaster.example.test.}
records:
  "@":   {NS: [ns1], HTTPS: ["1 . alpn=h2,h3"], CAA: ['0 issue "letsencrypt.org"']}
  ns1:   {A: 192.0.2.1, SSHFP: ["4 2 9dd2ae4e1e7d6e37bd3e6c3ee1c44b4a1ac2d3a4e5f60718293a4b5c6d7e8fe1"]}
  _dns.ns1: {SVCB: ["1 ns1 alpn=dot"]}
  _25._tcp.mail: {TLSA: ["3 1 1 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"]}
  sip:   {NAPTR: ['10 100 "S" "SIP+D2U" "" _sip._udp']}
  old:   {DNAME: new.example.}
  far:   {DNAME: ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff.ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff.ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff.example.}
  odd:   {TYPE65534: ['\# 4 0a000001']}
  txt:   {TXT: ['"a\226\134\146b del=\127" "caf\195\169" "a\009b"']}
  plain: {TXT: "caf\u00e9 as UTF-8"}
  'a\.b': {A: 192.0.2.2}
  'sp\032ace': {A: 192.0.2.3}
  café:  {A: 192.0.2.4}
  64/26: {NS: [ns1]}
  65:    {CNAME: 65.64/26}
"""


@pytest.fixture
def snapshot(tmp_path: Path):  # type: ignore[no-untyped-def]
    (tmp_path / "example.test.yaml").write_text(SPEC_ZONE)
    config, _ = load_config(tmp_path)
    return compile_snapshot(config, 1)


def rdata_of(snap, owner: str, rtype: int) -> list[bytes]:  # type: ignore[no-untyped-def]
    rrset = snap.zones["example.test."].nodes[owner].rrsets[rtype]
    return [to_wire(rd) for rd in rrset.rdatas]


def test_every_byte_of_a_label_keys_as_dnspython_writes_it() -> None:
    for byte in range(256):
        label = bytes([byte, ord("x")])
        assert escape_label(label) == dns.name.Name([label.lower(), b""]).to_text()[:-1]
        assert key_of_labels((label, b"example")) == dns.name.Name([label, b"example", b""]).canonicalize().to_text()  # fmt: skip
    assert labels("a\\.b.c\\\\.d\\046e.") == ["a\\.b", "c\\\\", "d\\046e"]
    assert parent("a\\.b.example.") == "example."
    assert is_below_or_at("x\\.y.example.", "example.")
    assert not is_below_or_at("a\\.example.", "example.")
    assert to_label("a\\.b.example.").label == (b"a.b", b"example")


def test_the_manual_s_example_loads_byte_for_byte(snapshot) -> None:  # type: ignore[no-untyped-def]
    assert rdata_of(snapshot, "txt.example.test.", QTYPE.TXT) == [
        b"\x0ba\xe2\x86\x92b del=\x7f" + b"\x05caf\xc3\xa9" + b"\x03a\tb"
    ]
    assert rdata_of(snapshot, "plain.example.test.", QTYPE.TXT) == [b"\x0ecaf\xc3\xa9 as UTF-8"]
    assert rdata_of(snapshot, "odd.example.test.", 65534) == [b"\x0a\x00\x00\x01"]
    https = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.HTTPS, "1 . alpn=h2,h3")
    assert rdata_of(snapshot, "example.test.", 65) == [https.to_wire()]
    nodes = snapshot.zones["example.test."].nodes
    for owner in ("a\\.b.example.test.", "sp\\032ace.example.test.", "xn--caf-dma.example.test.",
                  "64/26.example.test.", "_dns.ns1.example.test."):  # fmt: skip
        assert owner in nodes, owner


def test_dname_synthesises_a_cname_and_refuses_too_long_names(snapshot) -> None:  # type: ignore[no-untyped-def]
    found = lookup(snapshot, "www.old.example.test.", QTYPE.A)
    assert found.rcode == RCODE.NOERROR and found.authoritative
    dname, cname = found.answer
    assert dname.owner == "old.example.test." and dname.rrset.rtype == 39
    assert cname.owner is None and cname.rrset.rtype == QTYPE.CNAME
    assert str(cname.rrset.rdatas[0].label) == "www.new.example."
    assert cname.rrset.ttl == dname.rrset.ttl
    # RFC 6672 §2.2: a result beyond 255 octets is YXDOMAIN (the DNAME is still given).
    fits = lookup(snapshot, "a.far.example.test.", QTYPE.A)  # 2 + 196 octets
    assert fits.rcode == RCODE.NOERROR and len(fits.answer) == 2
    too_long = lookup(snapshot, "b" * 63 + ".far.example.test.", QTYPE.A)  # 64 + 196
    assert too_long.rcode == RCODE.YXDOMAIN and [p.rrset.rtype for p in too_long.answer] == [39]
    # RFC 2317: the CNAME into the classless delegation is followed to the referral.
    referral = lookup(snapshot, "65.example.test.", QTYPE.PTR)
    assert [p.rrset.rtype for p in referral.answer] == [QTYPE.CNAME]
    assert referral.authority and referral.authority[0].owner == "64/26.example.test."


@pytest.mark.parametrize(
    ("records", "path", "words"),
    [
        ("x: {TLSA: ['3 1 1 zz']}", "records.x.TLSA[0]", "invalid TLSA value"),
        ("x: {TYPE65534: ['\\# 3 0a00']}", "records.x.TYPE65534[0]", "invalid TYPE65534"),
        ("x: {TXT: ['\"a\\256\"']}", "records.x.TXT[0]", "invalid TXT value"),
        ("x: {RRSIG: ['A 13 2 60 20300101000000 20200101000000 1 example.test. AAAA']}",
         "records.x.RRSIG", "dnsd writes DNSSEC signatures"),
        ("x: {AXFR: ['x']}", "records.x.AXFR", "meta type"),
        ("x: {HTTP: ['1 . alpn=h2']}", "records.x.HTTP", 'did you mean "HTTPS"'),
        ("'a..b': {A: 192.0.2.1}", "records.a..b", "empty label"),
        ("x: {DNAME: [a.example., b.example.]}", "records.x.DNAME", "only one DNAME"),
    ],
)  # fmt: skip
def test_a_bad_record_is_a_config_error_naming_file_line_and_path(
    tmp_path: Path, records: str, path: str, words: str
) -> None:
    text = "zone: bad.test\nsoa: {mname: ns., rname: h.}\nrecords:\n  '@': {NS: [ns.]}\n  " + records + "\n"  # fmt: skip
    (tmp_path / "bad.test.yaml").write_text(text)
    found = [r for r in check_directory(tmp_path) if not r.warning]
    assert any(r.line == 5 and r.path == path and words in r.message for r in found), found
    with pytest.raises(ConfigError):
        load_config(tmp_path)


def test_address_rdata_is_its_wire_bytes_and_behaves_as_dnslibs() -> None:
    """A and AAAA RDATA are held as their wire bytes (most of a big zone's memory per
    record), and pack, print and compare as dnslib's own objects do."""
    import tracemalloc

    from dnslib import AAAA, RR, A, DNSRecord

    from dnsd.rdata import from_text, from_wire

    four = from_text(QTYPE.A, "192.0.2.7", "example.test.")
    six = from_text(QTYPE.AAAA, "2001:db8::7", "example.test.")
    assert to_wire(four) == bytes([192, 0, 2, 7]) and len(to_wire(six)) == 16
    assert (repr(four), str(six)) == ("192.0.2.7", "2001:db8::7")
    assert four == A("192.0.2.7") and A("192.0.2.7") == four and four != A("192.0.2.8")
    assert six == AAAA("2001:db8::7") and four != six and four == from_wire(1, to_wire(four))
    assert hash(four) == hash(from_wire(1, to_wire(four)))
    reply = DNSRecord(rr=[RR("a.example.test.", QTYPE.AAAA, rdata=six, ttl=60)]).pack()
    assert DNSRecord.parse(reply).rr[0].rdata == six
    with pytest.raises(ValueError, match="5 bytes"):
        from_wire(QTYPE.A, b"\x01\x02\x03\x04\x05")

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        held = [from_wire(QTYPE.A, bytes([10, 1, i >> 8, i & 255])) for i in range(10_000)]
        per_record = (tracemalloc.get_traced_memory()[0] - before) / len(held)
    finally:
        tracemalloc.stop()
    assert per_record <= 80, f"{per_record:.0f} bytes per A record (dnslib's own: ~150)"
