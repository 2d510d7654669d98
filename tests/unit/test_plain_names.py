"""The text shortcuts of `dnsd check` (plain names, dotted quads) give what dnspython and
ipaddress give, and reject what they reject."""

from __future__ import annotations

import ipaddress

import dns.exception
import dns.name
import dns.rdata
import pytest

from dnsd.dnsname import key_of, parse_name
from dnsd.rdata import from_text, to_wire

NAMES = ["s1", "WWW", "a.b", "A.B.", "*", "*.x", "a*b", "_srv._tcp", "x-y", "a" * 63,
         ".".join(["a" * 63] * 3) + ".", "lb9999"]  # fmt: skip
ORIGINS = ["big.test.", ".", "Ex.Test.", "a\\.b.test."]


@pytest.mark.parametrize("origin", ORIGINS)
@pytest.mark.parametrize("text", NAMES)
def test_plain_names_key_as_dnspython_does(text: str, origin: str) -> None:
    expected = key_of(dns.name.from_text(text, origin=dns.name.from_text(origin)))
    assert parse_name(text, origin) == expected


@pytest.mark.parametrize("text", ["a" * 64, ".".join(["a" * 63] * 4), "a..b", ".."])
def test_bad_names_still_rejected(text: str) -> None:
    with pytest.raises(dns.exception.DNSException):
        parse_name(text, "big.test.")


def test_dotted_quads() -> None:
    assert to_wire(from_text(1, " 10.0.1.255 ", "x.")) == bytes([10, 0, 1, 255])
    for bad in ["01.2.3.4", "256.1.1.1", "1.2.3", "1.2.3.4.5", "0x1.2.3.4"]:
        with pytest.raises(ValueError):
            from_text(1, bad, "x.")


def test_addresses_equal_what_dnslib_makes() -> None:
    """The A and AAAA made without dnslib's range setters equal, pack and print like
    dnslib's own objects; a bad address is still refused."""
    from dnslib import AAAA, A

    for text in ["10.0.1.255", "0.0.0.0", "255.255.255.255"]:
        made = from_text(1, text, "x.")
        assert made == A(text) and repr(made) == text and made.data == A(text).data
    for text in ["2001:db8::1", "::", "::ffff:10.0.0.1"]:
        made = from_text(28, text, "x.")
        packed = ipaddress.IPv6Address(text).packed
        assert made == AAAA(tuple(packed)) and to_wire(made) == packed
    for bad in ["2001:db8::g", "1:2:3:4:5:6:7:8:9", ""]:
        with pytest.raises(ValueError):
            from_text(28, bad, "x.")


def test_a_plain_zone_is_checked_without_per_record_objects(tmp_path, monkeypatch) -> None:
    """`dnsd check` of plain names with A and AAAA records builds no dnspython name or
    RDATA and runs no dnslib constructor or range setter per record (the work that made
    it 2x slower than libyaml on 100,000 records); the zone is still complete."""
    import dnslib.dns

    from dnsd.config.loader import load_config

    counts = {"dns.name.from_text": 0, "dns.rdata.from_text": 0, "A()": 0, "AAAA()": 0}

    def counting(key, real):  # type: ignore[no-untyped-def]
        def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
            counts[key] += 1
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(dns.name, "from_text", counting("dns.name.from_text", dns.name.from_text))
    monkeypatch.setattr(
        dns.rdata, "from_text", counting("dns.rdata.from_text", dns.rdata.from_text)
    )
    monkeypatch.setattr(dnslib.dns.A, "__init__", counting("A()", dnslib.dns.A.__init__))
    monkeypatch.setattr(dnslib.dns.AAAA, "__init__", counting("AAAA()", dnslib.dns.AAAA.__init__))
    records = "".join(f"  s{i}: {{A: 10.0.{i // 256}.{i % 256}}}\n" for i in range(300))
    records += "".join(f"  v{i}: {{AAAA: '2001:db8::{i:x}', ttl: 60}}\n" for i in range(300))
    (tmp_path / "z.yaml").write_text(
        "zone: big.test\nsoa: {mname: ns1.big.test., rname: h.big.test.}\nrecords:\n"
        '  "@": {NS: ns1.big.test.}\n  ns1: {A: 127.0.0.1}\n' + records
    )
    before = dict(counts)
    config, reasons = load_config(tmp_path)
    assert reasons == []
    (zone,) = config.zones
    by_owner = {(s.owner, s.rtype): s for s in zone.rrsets}
    assert to_wire(by_owner[("s299.big.test.", 1)].rdatas[0]) == bytes([10, 0, 1, 43])
    assert to_wire(by_owner[("v255.big.test.", 28)].rdatas[0])[-2:] == b"\x00\xff"
    assert by_owner[("v1.big.test.", 28)].ttl == 60 and len(zone.rrsets) == 602
    made = {k: counts[k] - before[k] for k in counts}
    # dnspython reads the apex's NS target (a name, not an address) and a few names once
    # per zone (its origin), none per record.
    assert made["dns.rdata.from_text"] == 1 and made["dns.name.from_text"] <= 5
    assert made["A()"] == 0 and made["AAAA()"] == 0
