"""Compact denial (RFC 9824) signed at wire level: the fast path of online signing.

A negative answer (NXDOMAIN, NODATA, and a query for type NSEC) is the question, the
zone's SOA with its RRSIG — rendered and signed once per zone version, key set and day
(`Prepared`) — and one NSEC at the query name with its RRSIG, the only signature made per
answer. No message is parsed into objects and rendered again: a random-name flood costs
one signature per answer.

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

from dnsd.dnsname import key_of_labels, name_end, wire_labels
from dnsd.dnssec import wire
from dnsd.dnssec.signature import make_signature, window
from dnsd.snapshot import CompiledZone
from dnsd.zone_keys import ZoneKey, ZoneKeys
from dnsd.zone_lookup import wildcard_node

AA: Final = 0x04  # in the third octet of the header
QUESTION: Final = b"\xc0\x0c"  # a pointer to the question's name
EDNS_PAYLOAD: Final = 1232  # what dnsd advertises (dnsd.reply.EDNS_PAYLOAD)


@dataclass(frozen=True, slots=True)
class Prepared:
    """What every negative answer of one zone version, key set and day shares."""

    keys: ZoneKeys
    key: ZoneKey  # signs the NSEC (the ZSK, or the CSK)
    inception: int
    expiration: int
    origin: bytes  # the apex, wire form, lower case: the RRSIGs' signer name
    soa: bytes  # the SOA RR and its RRSIG RR, ready to append


# Kept with the compiled zone (a new version is a new zone object, with its own SOA).
PREPARED = "dnssec denial"


def sign_negative(
    reply: bytes, zone: CompiledZone, keys: ZoneKeys, now: float, co: bool
) -> bytes | None:
    """The signed form of `reply` when it is a plain negative answer (AA, no answer, the
    SOA alone in the authority section); None for every other reply (the general path)."""
    if len(reply) < 12 or not reply[2] & AA:
        return None
    qdcount, ancount, nscount, arcount = struct.unpack_from("!HHHH", reply, 4)
    rcode = reply[3] & 0x0F
    if qdcount != 1 or ancount or nscount != 1 or rcode not in (0, 3):
        return None
    qend = name_end(reply, 12)
    if qend is None or qend + 4 > len(reply) or reply[qend - 1] != 0:
        return None
    qname = reply[12:qend]  # the question is rendered in lower case (reply_for)
    (qtype,) = struct.unpack_from("!H", reply, qend)
    soa_at = qend + 4
    soa_rdata = name_end(reply, soa_at)
    if soa_rdata is None or soa_rdata + 10 > len(reply):
        return None
    rtype, _, _, rdlen = struct.unpack_from("!HHIH", reply, soa_rdata)
    if rtype != wire.SOA:
        return None
    additional = reply[soa_rdata + 10 + rdlen :]
    prepared = _prepare(zone, keys, now, reply)
    records, counts, out_rcode = _denial(zone, prepared, qname, qtype, rcode == 3, co)
    header = (
        reply[:3]
        + bytes([(reply[3] & 0xF0) | out_rcode])
        + struct.pack("!HHHH", 1, *counts, arcount)
    )
    if co:
        additional = _with_co(additional, arcount)
    return header + reply[12 : qend + 4] + records + additional


def compact_nxdomain(
    query: bytes,
    qname: bytes,
    qtype: int,
    zone: CompiledZone,
    keys: ZoneKeys,
    now: float,
    ecs_echo: bytes | None,
    limit: int | str,
    co: bool,
) -> bytes | None:
    """The whole signed reply to a DO=1 query (`query`, its question name `qname` as sent;
    `co`: its OPT's CO flag, from the query view) for a name that does not exist in `zone`,
    built without the full path — the same bytes the full path and `sign_negative` make. None when the zone's SOA is not prepared yet
    for this version and day (the full path prepares it) or the reply would not fit."""
    inception, _ = window(now)
    prepared: Prepared | None = zone.derived.peek(PREPARED)
    if prepared is None or prepared.keys is not keys or prepared.inception != inception:
        return None
    records, counts, rcode = _denial(zone, prepared, qname.lower(), qtype, True, co)
    flags = 0x8400 | (query[2] & 0x01) << 8 | (query[3] & 0x10) | rcode  # QR AA, RD and CD kept
    options = b"" if ecs_echo is None else struct.pack("!HH", 8, len(ecs_echo)) + ecs_echo
    opt = (
        b"\x00"
        + struct.pack(
            "!HHBBHH", wire.OPT, EDNS_PAYLOAD, 0, 0, 0x8000 | co * wire.CO_FLAG, len(options)
        )
        + options
    )
    reply = (
        query[:2]
        + struct.pack("!HHHHH", flags, 1, *counts, 1)
        + query[12 : 12 + len(qname) + 4]
        + records
        + opt
    )
    if limit != "tcp" and len(reply) > int(limit):
        return None
    return reply


def _denial(
    zone: CompiledZone, prepared: Prepared, qname: bytes, qtype: int, nxdomain: bool, co: bool
) -> tuple[bytes, tuple[int, int], int]:
    """(the records, (answer, authority) counts, rcode) of a compact denial for `qname`
    (lower case): one NSEC at it and the one signature made per answer."""
    types = (
        wire.NXNAME_BITMAP
        if nxdomain
        else wire.bitmap(
            nsec_types(zone, key_of_labels(wire_labels(qname)), nxname=False, absent=qtype)
        )
    )
    ttl = zone.negative_ttl
    nsec = wire.successor(qname) + types
    key = prepared.key
    head = wire.rrsig_head(
        key, wire.NSEC, qname, ttl, prepared.inception, prepared.expiration, prepared.origin
    )
    sig = make_signature(key, head + wire.canonical_rrset(qname, wire.NSEC, ttl, (nsec,)))
    records = wire.rr(QUESTION, wire.NSEC, ttl, nsec) + wire.rr(
        QUESTION, wire.RRSIG, ttl, head + sig
    )
    if qtype == wire.NSEC and not (nxdomain and co):
        return records, (2, 0), 0  # the NSEC is the answer (what Knot does)
    return prepared.soa + records, (0, 4), 3 if nxdomain and co else 0


def _prepare(zone: CompiledZone, keys: ZoneKeys, now: float, reply: bytes) -> Prepared:
    inception, expiration = window(now)
    found: Prepared | None = zone.derived.peek(PREPARED)
    if found is not None and found.keys is keys and found.inception == inception:
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
    prepared = Prepared(keys, key, inception, expiration, origin, soa)
    zone.derived.put(PREPARED, prepared)
    return prepared


def _with_co(additional: bytes, count: int) -> bytes:
    """The additional section with the CO flag set in its OPT record (echoed, RFC 9824 §4)."""
    out = bytearray(additional)
    pos = 0
    for _ in range(count):
        after = name_end(additional, pos)
        if after is None or after + 10 > len(out):
            break
        rtype, _, _, rdlen = struct.unpack_from("!HHIH", out, after)
        if rtype == wire.OPT:
            out[after + 6] |= wire.CO_FLAG >> 8
        pos = after + 10 + rdlen
    return bytes(out)


LB_TYPES = (1, 28)  # A, AAAA: what a load-balanced name has


def present_types(zone: CompiledZone, name: str) -> set[int]:
    """The types at `name` (lower-case text) as the lookup serves them: its own, or the
    wildcard's that answers for it; a load-balanced name has A and AAAA."""
    node = zone.nodes.get(name) or wildcard_node(zone, name)
    return {*(node.rrsets if node else ()), *(LB_TYPES if node and node.lb else ())}


def nsec_types(zone: CompiledZone, name: str, nxname: bool, absent: int) -> list[int]:
    """The bitmap of the one NSEC of compact denial at `name`: RRSIG, NSEC and NXNAME for
    a name that does not exist; else the name's types with RRSIG and NSEC — never `absent`,
    the type a NODATA answer says is not there (a query for NSEC gets the NSEC itself).
    A query for RRSIG gets NODATA whose bitmap leaves RRSIG out, so it agrees with itself."""
    if nxname:
        return [wire.RRSIG, wire.NSEC, wire.NXNAME]
    types = present_types(zone, name) | {wire.RRSIG, wire.NSEC}
    return sorted(types if absent == wire.NSEC else types - {absent})  # NSEC: the answer
