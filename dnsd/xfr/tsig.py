"""TSIG (RFC 8945) with dnspython's implementation: checking a signed query, signing the
replies to it, and the unsigned NOTAUTH a bad signature gets.

A query whose MAC does not check gets NOTAUTH with the TSIG error (BADKEY, BADSIG,
BADTIME) in an unsigned TSIG record, and a rate-limited log line naming the client and
the key; secrets never reach a log. dnsd answers BADTIME unsigned too (RFC 8945 §5.2.3
asks for a signed one): the client learns the error either way.
"""

from __future__ import annotations

import io
import struct
from typing import Any, Final

import dns.exception
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.TSIG
import dns.rrset
import dns.tsig

from dnsd.tsig_keyring import Keyring

TSIG_TYPE: Final = 250
FUDGE: Final = 300
TSIG_ERRORS: Final = {16: "BADSIG", 17: "BADKEY", 18: "BADTIME"}  # rcode 16 is also BADVERS


def key_name(key: dns.tsig.Key | None) -> str | None:
    """The configured name of a key ("xfr-key"), as `transfer.keys` lists it."""
    return key.name.to_text(omit_final_dot=True).lower() if key is not None else None


class TsigFailure(Exception):
    def __init__(self, error: int, key: str, reply: bytes) -> None:
        super().__init__(error, key)
        self.error = error  # dns.rcode.BADKEY, BADSIG or BADTIME
        self.key = key  # the key name the client used
        self.reply = reply  # NOTAUTH with the error in an unsigned TSIG record

    def describe(self) -> str:
        return f"TSIG {TSIG_ERRORS.get(self.error, self.error)} (key {self.key})"


def check(wire: bytes, ring: Keyring, now: float, **parse: Any) -> dns.message.Message:
    """The message, its TSIG (if any) checked against `ring`; raises TsigFailure, or
    dns.exception.DNSException when the message itself is malformed."""
    try:
        return dns.message.from_wire(wire, keyring=lambda _m, name: ring.get(name), **parse)
    except dns.message.UnknownTSIGKey:
        error = dns.rcode.BADKEY
    except (dns.tsig.BadKey, dns.tsig.BadAlgorithm):
        error = dns.rcode.BADKEY
    except dns.tsig.BadSignature:
        error = dns.rcode.BADSIG
    except dns.tsig.BadTime:
        error = dns.rcode.BADTIME
    except dns.tsig.PeerError:
        error = dns.rcode.BADSIG  # a query carrying an error code is no valid signature
    unchecked = dns.message.from_wire(wire, keyring=_no_check, **parse)
    raise TsigFailure(error, _name(unchecked), notauth(unchecked, error, now))


def sign(reply: bytes, query: dns.message.Message) -> bytes:
    """Our reply to a signed query, signed with the query's key (request MAC included)."""
    message = dns.message.from_wire(reply)
    algorithm = query.keyalgorithm or dns.tsig.default_algorithm
    message.use_tsig(query.keyring, query.keyname, fudge=FUDGE, algorithm=algorithm)
    message.request_mac = query.mac or b""
    return message.to_wire(want_shuffle=False)  # dnspython shuffles records by default


def signed_reply(query: dns.message.Message, rcode: int, now: float) -> bytes | None:
    """The answer to a signed query without EDNS that has only its question (an UPDATE's
    zone) in it, and `rcode`, signed with the query's key: the bytes dnspython's
    make_response and to_wire give, written directly (measured: a tenth of their cost,
    which is Python work on the event loop for each UPDATE of a burst). None when the
    query does not fit (EDNS, no TSIG, an extended rcode): the caller uses dnspython."""
    key = query.keyring
    if not (query.had_tsig and isinstance(key, dns.tsig.Key)) or query.edns >= 0 or rcode > 15:
        return None
    flags = 0x8000 | (query.opcode() << 11) | (query.flags & 0x0100) | rcode  # QR, RD kept
    out = io.BytesIO()
    out.write(struct.pack("!HHHHHH", query.id, flags, len(query.question), 0, 0, 0))
    compress: dict[dns.name.Name, int] = {}
    for question in query.question:
        question.name.to_wire(out, compress)
        out.write(struct.pack("!HH", question.rdtype, question.rdclass))
    unsigned = out.getvalue()
    template = dns.rdtypes.ANY.TSIG.TSIG(
        dns.rdataclass.ANY, dns.rdatatype.TSIG, key.algorithm, 0, FUDGE, b"", query.id, 0, b""
    )
    rdata, _ = dns.tsig.sign(unsigned, key, template, int(now), query.mac or b"")
    key.name.to_wire(out, compress)
    out.write(struct.pack("!HHI", dns.rdatatype.TSIG, dns.rdataclass.ANY, 0))
    body = io.BytesIO()
    rdata.to_wire(body)
    out.write(struct.pack("!H", len(body.getvalue())) + body.getvalue())
    wire = bytearray(out.getvalue())
    struct.pack_into("!H", wire, 10, 1)  # ARCOUNT: the TSIG record
    return bytes(wire)


def notauth(query: dns.message.Message, error: int, now: float) -> bytes:
    """NOTAUTH with an unsigned TSIG record carrying `error` (RFC 8945 §5.2)."""
    response = dns.message.make_response(query)
    response.set_rcode(dns.rcode.NOTAUTH)
    wire = bytearray(response.to_wire())
    assert query.tsig is not None
    asked = query.tsig[0]
    rdata = dns.rdtypes.ANY.TSIG.TSIG(
        dns.rdataclass.ANY,
        dns.rdatatype.TSIG,
        asked.algorithm,
        int(now),
        FUDGE,
        b"",
        asked.original_id,
        error,
        b"",
    )
    out = io.BytesIO()
    dns.rrset.from_rdata(query.tsig.name, 0, rdata).to_wire(out)
    (arcount,) = struct.unpack_from("!H", wire, 10)
    struct.pack_into("!H", wire, 10, arcount + 1)
    return bytes(wire) + out.getvalue()


def _no_check(_message: Any, _name: Any) -> bool:
    return False  # dnspython: a falsy key that is not None keeps the TSIG unchecked


def _name(message: dns.message.Message) -> str:
    return message.tsig.name.to_text(omit_final_dot=True) if message.tsig is not None else ""


__all__ = ["TsigFailure", "check", "dns", "notauth", "sign", "signed_reply"]
