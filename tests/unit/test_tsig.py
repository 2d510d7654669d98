"""TSIG (RFC 8945) through dnspython: both algorithms check, and each failure names its
TSIG error in an unsigned NOTAUTH."""

from __future__ import annotations

import base64

import dns.message
import dns.name
import dns.rcode
import dns.tsig
import dns.tsigkeyring
import dns.update
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


@pytest.mark.parametrize("key", ["k256", "k512", "key.example.test"])  # the last compressed
@pytest.mark.parametrize("rcode", [dns.rcode.NOERROR, dns.rcode.REFUSED, dns.rcode.NXRRSET])
def test_a_signed_reply_written_directly_is_dnspythons_byte_for_byte(key: str, rcode: int) -> None:
    secret = base64.b64encode(SECRET).decode()
    algorithm = dns.tsig.HMAC_SHA512 if key == "k512" else dns.tsig.HMAC_SHA256
    ring = dns.tsigkeyring.from_text({key: secret})
    update = dns.update.UpdateMessage("Example.TEST.", keyring=ring, keyname=key)
    update.use_tsig(ring, keyname=key, algorithm=algorithm)
    update.add("_acme-challenge.www.example.test.", 60, "TXT", "token")
    ours = {**RING, dns.name.from_text(key): dns.tsig.Key(key, secret, algorithm)}
    query = tsig.check(update.to_wire(), ours, 0.0)
    response = dns.message.make_response(query)
    response.set_rcode(dns.rcode.Rcode.make(rcode))
    theirs = response.to_wire()
    signed_at = dns.message.from_wire(theirs, keyring=ours, request_mac=query.mac).tsig
    assert signed_at is not None
    assert tsig.signed_reply(query, rcode, signed_at[0].time_signed) == theirs


def test_a_reply_dnspython_must_write_is_left_to_it() -> None:
    with_edns = tsig.check(signed("k256", dns.tsig.HMAC_SHA256), RING, 0.0)
    with_edns.use_edns(0)
    unsigned = dns.message.make_query("example.test.", "SOA")
    assert tsig.signed_reply(with_edns, dns.rcode.NOERROR, 0.0) is None
    assert tsig.signed_reply(unsigned, dns.rcode.NOERROR, 0.0) is None
    assert tsig.signed_reply(with_edns, dns.rcode.BADVERS, 0.0) is None
