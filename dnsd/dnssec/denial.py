"""Compact denial (RFC 9824) signed at wire level: the fast path of online signing.

A negative answer (NXDOMAIN, NODATA, and a query for type NSEC) is the question, the
zone's SOA with its RRSIG — rendered and signed once per zone version, key set and day
(`Prepared`) — and one NSEC at the query name with its RRSIG, the only signature made per
answer. No message is parsed into objects and rendered again: a random-name flood costs
one signature per answer (issue 31).

The NSEC's next name is written uncompressed in lower case: RFC 6840 §5.1 keeps the case
of NSEC next names in the signed form, and a pointer into the question would show the
query's 0x20 case (the question is copied back as sent) and break the signature.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

import dns.message
import dns.name
import dns.rdatatype

from dnsd.dnssec import wire
from dnsd.dnssec.keys import ZoneKey, ZoneKeys
from dnsd.snapshot import CompiledZone

AA: Final = 0x04  # in the third octet of the header
QUESTION: Final = b"\xc0\x0c"  # a pointer to the question's name
KEPT: Final = 64
_PLAIN: Final = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789-_*")


@dataclass(frozen=True, slots=True)
class Prepared:
    """What every negative answer of one zone version, key set and day shares."""

    zone: CompiledZone
    keys: ZoneKeys
    key: ZoneKey  # signs the NSEC (the ZSK, or the CSK)
    inception: int
    expiration: int
    origin: bytes  # the apex, wire form, lower case: the RRSIGs' signer name
    soa: bytes  # the SOA RR and its RRSIG RR, ready to append


_prepared: dict[tuple[int, int, int], Prepared] = {}


def sign_negative(reply: bytes, zone: CompiledZone, keys: ZoneKeys, now: float,
                  co: bool) -> bytes | None:  # fmt: skip
    """The signed form of `reply` when it is a plain negative answer (AA, no answer, the
    SOA alone in the authority section); None for every other reply (the general path)."""
    from dnsd.dnssec.signer import make_signature, nsec_types, window

    if len(reply) < 12 or not reply[2] & AA:
        return None
    qdcount, ancount, nscount, arcount = struct.unpack_from("!HHHH", reply, 4)
    rcode = reply[3] & 0x0F
    if qdcount != 1 or ancount or nscount != 1 or rcode not in (0, 3):
        return None
    qend = _name_end(reply, 12)
    if qend is None or qend + 4 > len(reply) or reply[qend - 1] != 0:
        return None
    qname = reply[12:qend]  # the question is rendered in lower case (reply_for)
    (qtype,) = struct.unpack_from("!H", reply, qend)
    soa_at = qend + 4
    soa_rdata = _name_end(reply, soa_at)
    if soa_rdata is None or soa_rdata + 10 > len(reply):
        return None
    rtype, _, _, rdlen = struct.unpack_from("!HHIH", reply, soa_rdata)
    if rtype != wire.SOA:
        return None
    additional = reply[soa_rdata + 10 + rdlen :]
    inception, expiration = window(now)
    prepared = _prepare(zone, keys, inception, expiration, reply)

    nxdomain = rcode == 3
    types = (
        [wire.RRSIG, wire.NSEC, wire.NXNAME]
        if nxdomain
        else nsec_types(zone, _text(qname), nxname=False, absent=qtype)
    )
    ttl = zone.negative_ttl
    nsec = wire.successor(qname.lower()) + wire.bitmap(types)
    key = prepared.key
    head = wire.rrsig_head(key, wire.NSEC, qname, ttl, inception, expiration, prepared.origin)
    sig = make_signature(key, head + wire.canonical_rrset(qname, wire.NSEC, ttl, (nsec,)))
    records = wire.rr(QUESTION, wire.NSEC, ttl, nsec) + wire.rr(
        QUESTION, wire.RRSIG, ttl, head + sig
    )
    if qtype == wire.NSEC and not (nxdomain and co):
        counts, out_rcode = (2, 0), 0  # the NSEC is the answer (what Knot does)
    else:
        records = prepared.soa + records
        counts, out_rcode = (0, 4), 3 if nxdomain and co else 0
    header = (
        reply[:3]
        + bytes([(reply[3] & 0xF0) | out_rcode])
        + struct.pack("!HHHH", 1, *counts, arcount)
    )
    if co:
        additional = _with_co(additional, arcount)
    return header + reply[12 : qend + 4] + records + additional


def _prepare(zone: CompiledZone, keys: ZoneKeys, inception: int, expiration: int,
             reply: bytes) -> Prepared:  # fmt: skip
    from dnsd.dnssec.signer import make_signature

    cache_key = (id(zone), id(keys), inception)
    found = _prepared.get(cache_key)
    if found is not None and found.zone is zone and found.keys is keys:
        return found
    origin_name = dns.name.from_text(zone.name)
    origin = origin_name.canonicalize().to_wire()
    assert origin is not None
    soa_rrset = next(
        r for r in dns.message.from_wire(reply).authority if r.rdtype == dns.rdatatype.SOA
    )  # once per zone version and day: the SOA as the lookup renders it
    rdata = soa_rrset[0]
    key = keys.signer_for(wire.SOA)
    ttl = soa_rrset.ttl
    head = wire.rrsig_head(key, wire.SOA, origin, ttl, inception, expiration, origin)
    digestable = rdata.to_digestable(origin_name)
    sig = make_signature(key, head + wire.canonical_rrset(origin, wire.SOA, ttl, (digestable,)))
    owner = origin_name.to_wire()
    assert owner is not None
    soa = wire.rr(owner, wire.SOA, ttl, rdata.to_wire()) + wire.rr(
        owner, wire.RRSIG, ttl, head + sig
    )
    prepared = Prepared(zone, keys, key, inception, expiration, origin, soa)
    if len(_prepared) >= KEPT:
        _prepared.clear()
    _prepared[cache_key] = prepared
    return prepared


def _name_end(message: bytes, pos: int) -> int | None:
    """Where the name at `pos` ends (after its root label or its pointer)."""
    end = len(message)
    while pos < end:
        length = message[pos]
        if length == 0:
            return pos + 1
        if length & 0xC0:
            return pos + 2 if length & 0xC0 == 0xC0 else None
        pos += length + 1
    return None


def _with_co(additional: bytes, count: int) -> bytes:
    """The additional section with the CO flag set in its OPT record (echoed, RFC 9824 §4)."""
    out = bytearray(additional)
    pos = 0
    for _ in range(count):
        name_end = _name_end(additional, pos)
        if name_end is None or name_end + 10 > len(out):
            break
        rtype, _, _, rdlen = struct.unpack_from("!HHIH", out, name_end)
        if rtype == wire.OPT:
            out[name_end + 6] |= wire.CO_FLAG >> 8
        pos = name_end + 10 + rdlen
    return bytes(out)


def _text(qname: bytes) -> str:
    """The lower-case text the zone lookup uses for a wire name (dnsd.reply.lookup_name):
    bytes no configured name can hold as `\\DDD` escapes."""
    labels, pos = [], 0
    while qname[pos]:
        label = qname[pos + 1 : pos + 1 + qname[pos]].lower()
        if set(label) <= _PLAIN:
            labels.append(label.decode("ascii"))
        else:
            labels.append("".join(chr(b) if b in _PLAIN else f"\\{b:03d}" for b in label))
        pos += qname[pos] + 1
    return ".".join(labels) + "." if labels else "."
