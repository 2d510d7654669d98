"""TSIG (RFC 8945) through dnspython: both algorithms check, and each failure names its
TSIG error in an unsigned NOTAUTH."""

from __future__ import annotations

import base64

import dns.message
import dns.rcode
import dns.tsig
import dns.tsigkeyring
import pytest

from dnsd.config.model import TsigKey
from dnsd.tsig_keyring import keyring
from dnsd.xfr import tsig

SECRET = bytes(range(32))
RING = keyring(
    {
        "k256": TsigKey("k256", "hmac-sha256", SECRET),
        "k512": TsigKey("k512", "hmac-sha512", SECRET),
    }
)


def signed(key: str, algorithm: str, secret: bytes = SECRET) -> bytes:
    query = dns.message.make_query("example.test.", "SOA")
    ring = dns.tsigkeyring.from_text({key: base64.b64encode(secret).decode()})
    query.use_tsig(ring, keyname=key, algorithm=algorithm)
    return query.to_wire()


@pytest.mark.parametrize(
    ("key", "algorithm"), [("k256", dns.tsig.HMAC_SHA256), ("k512", dns.tsig.HMAC_SHA512)]
)
def test_both_algorithms_check_and_replies_are_signed(key: str, algorithm: str) -> None:
    query = tsig.check(signed(key, algorithm), RING, 0.0)
    assert tsig.key_name(query.keyring) == key
    reply = dns.message.make_response(dns.message.make_query("example.test.", "SOA"))
    reply.id = query.id
    wire = tsig.sign(reply.to_wire(), query)
    checked = dns.message.from_wire(wire, keyring=RING, request_mac=query.mac)
    assert checked.had_tsig


@pytest.mark.parametrize(
    ("wire", "error"),
    [
        (signed("nobody", dns.tsig.HMAC_SHA256), dns.rcode.BADKEY),
        (signed("k256", dns.tsig.HMAC_SHA256, bytes(32)), dns.rcode.BADSIG),
        (signed("k256", dns.tsig.HMAC_SHA512), dns.rcode.BADKEY),  # the wrong algorithm
    ],
    ids=["unknown key", "bad signature", "wrong algorithm"],  # the wire differs each run
)
def test_failures_are_notauth_with_the_tsig_error(wire: bytes, error: int) -> None:
    with pytest.raises(tsig.TsigFailure) as caught:
        tsig.check(wire, RING, 0.0)
    assert caught.value.error == error
    reply = dns.message.from_wire(caught.value.reply, keyring=False)
    assert reply.rcode() == dns.rcode.NOTAUTH
    assert reply.tsig is not None and reply.tsig[0].error == error and reply.tsig[0].mac == b""
