"""The text shortcuts of `dnsd check` (plain names, dotted quads) give what dnspython and
ipaddress give, and reject what they reject."""

from __future__ import annotations

import dns.exception
import dns.name
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
