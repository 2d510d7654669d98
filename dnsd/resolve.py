"""The per-query pipeline: wire bytes in, wire bytes out. Synchronous; never raises.

    resolve(wire, client, snap) -> bytes | None

Rcode contract (what each kind of input gets):
* fewer than 12 bytes, or a response (QR=1): None, a deliberate drop the caller counts;
* opcode other than QUERY: NOTIMP;
* a header that parses but a body that does not (bad labels, pointer loops, truncated
  records), QDCOUNT ≠ 1, several OPT records: FORMERR;
* EDNS version > 0: BADVERS (RFC 6891 §6.1.3);
* class other than IN, zone transfers, names outside every zone: REFUSED;
* an unexpected exception while answering: SERVFAIL (and the caller logs it).
UDP replies larger than the client allows (512 bytes without EDNS, else its payload size,
capped at our advertised 1232) are sent empty with TC=1 so the client retries over TCP.
"""

from __future__ import annotations

import ipaddress
import logging
import struct
from dataclasses import dataclass
from typing import Final, Literal

from dnslib import AAAA, CNAME, EDNS0, OPCODE, QTYPE, RCODE, RR, A, DNSHeader, DNSLabel, DNSRecord

from dnsd.snapshot import Snapshot
from dnsd.steering import answer_load_balancer
from dnsd.zone_lookup import Lookup, lookup

log = logging.getLogger("dnsd.resolve")

EDNS_PAYLOAD: Final = 1232  # advertised UDP payload (DNS flag day 2020 value)
PLAIN_UDP_LIMIT: Final = 512
BADVERS: Final = 16
QR_BIT: Final = 0x8000
CLASS_IN: Final = 1
CLASS_ANY: Final = 255
REFUSED_QTYPES: Final = frozenset({QTYPE.AXFR, QTYPE.IXFR})


@dataclass(frozen=True, slots=True)
class Client:
    address: ipaddress.IPv4Address | ipaddress.IPv6Address
    transport: Literal["udp", "tcp"]


@dataclass(frozen=True, slots=True)
class Edns:
    payload: int
    do: bool


def resolve(wire: bytes, client: Client, snap: Snapshot) -> bytes | None:
    if len(wire) < 12:
        return None
    ident, flags = struct.unpack_from("!HH", wire)
    if flags & QR_BIT:
        return None
    opcode = (flags >> 11) & 0xF
    if opcode != OPCODE.QUERY:
        return _header_only(ident, flags, RCODE.NOTIMP)
    try:
        query = DNSRecord.parse(wire)
    except Exception:  # dnslib raises many kinds of exception on bad input
        return _header_only(ident, flags, RCODE.FORMERR)
    try:
        return _answer(query, client, snap)
    except Exception:
        log.exception("SERVFAIL for query %s from %s", query.q.qname, client.address)
        return _servfail(query, ident, flags)


def _answer(query: DNSRecord, client: Client, snap: Snapshot) -> bytes:
    if len(query.questions) != 1 or not _valid_name(query.q.qname):
        return _header_only(query.header.id, query.header.bitmap, RCODE.FORMERR)
    opts = [rr for rr in query.ar if rr.rtype == QTYPE.OPT]
    if len(opts) > 1 or (opts and str(opts[0].rname) != "."):
        return _header_only(query.header.id, query.header.bitmap, RCODE.FORMERR)
    edns = Edns(max(PLAIN_UDP_LIMIT, opts[0].rclass), bool(opts[0].ttl & 0x8000)) if opts else None
    reply = _reply_for(query, edns)
    if opts and (opts[0].ttl >> 16) & 0xFF:
        reply.header.rcode = 0
        reply.ar = [EDNS0(udp_len=EDNS_PAYLOAD, ext_rcode=BADVERS >> 4)]
        return reply.pack()
    qtype, qclass = query.q.qtype, query.q.qclass
    if qclass not in (CLASS_IN, CLASS_ANY) or qtype in REFUSED_QTYPES:
        reply.header.rcode = RCODE.REFUSED
    elif qtype == QTYPE.OPT:
        reply.header.rcode = RCODE.FORMERR
    else:
        _fill(reply, lookup(snap, str(query.q.qname).lower(), qtype), query, snap)
    return _pack(reply, client, edns)


def _reply_for(query: DNSRecord, edns: Edns | None) -> DNSRecord:
    h = query.header
    header = DNSHeader(id=h.id, qr=1, opcode=h.opcode, rd=h.rd, cd=h.cd, ra=0, aa=0)
    reply = DNSRecord(header, q=query.q)
    if edns is not None:
        reply.add_ar(EDNS0(udp_len=EDNS_PAYLOAD, flags="do" if edns.do else ""))
    return reply


def _fill(reply: DNSRecord, result: Lookup, query: DNSRecord, snap: Snapshot) -> None:
    reply.header.rcode = result.rcode
    reply.header.aa = int(result.authoritative)
    qname = query.q.qname
    for part in result.answer:
        owner = qname if part.owner is None else DNSLabel(part.owner)
        for rr in part.rrset.records:
            reply.add_answer(RR(owner, rr.rtype, ttl=part.rrset.ttl, rdata=rr.rdata))
    if result.lb is not None:
        owner = qname if result.lb_owner is None else DNSLabel(result.lb_owner)
        qtype = QTYPE.A if query.q.qtype == QTYPE.ANY else query.q.qtype
        lb = answer_load_balancer(snap, result.lb, qtype)
        if lb.cname:
            reply.add_answer(RR(owner, QTYPE.CNAME, ttl=lb.ttl, rdata=CNAME(lb.cname)))
        for address in lb.addresses:
            rdata = AAAA(address) if qtype == QTYPE.AAAA else A(address)
            reply.add_answer(RR(owner, qtype, ttl=lb.ttl, rdata=rdata))
        if not lb.cname and not lb.addresses:
            result.negative = True
    for rrset in result.authority:
        for rr in rrset.records:
            reply.add_auth(RR(DNSLabel(rrset.owner), rr.rtype, ttl=rrset.ttl, rdata=rr.rdata))
    if result.negative and result.zone is not None:
        soa = result.zone.soa
        reply.add_auth(RR(soa.rname, QTYPE.SOA, ttl=result.zone.negative_ttl, rdata=soa.rdata))
    for rrset in result.additional:
        for rr in rrset.records:
            reply.add_ar(RR(DNSLabel(rrset.owner), rr.rtype, ttl=rrset.ttl, rdata=rr.rdata))


def _pack(reply: DNSRecord, client: Client, edns: Edns | None) -> bytes:
    wire = reply.pack()
    if client.transport == "tcp":
        return wire
    limit = min(edns.payload, EDNS_PAYLOAD) if edns else PLAIN_UDP_LIMIT
    if len(wire) <= limit:
        return wire
    reply.header.tc = 1
    reply.rr, reply.auth = [], []
    reply.ar = [rr for rr in reply.ar if rr.rtype == QTYPE.OPT]
    return reply.pack()


def _valid_name(label: DNSLabel) -> bool:
    """RFC 1035 §2.3.4: labels of at most 63 octets, names of at most 255 on the wire."""
    return all(0 < len(part) <= 63 for part in label.label) and (
        sum(len(part) + 1 for part in label.label) + 1 <= 255
    )


def _servfail(query: DNSRecord, ident: int, flags: int) -> bytes:
    try:
        reply = _reply_for(query, None)
        reply.header.rcode = RCODE.SERVFAIL
        return reply.pack()
    except Exception:
        return _header_only(ident, flags, RCODE.SERVFAIL)


def _header_only(ident: int, flags: int, rcode: int) -> bytes:
    # Keep opcode, RD and CD from the query; set QR; clear AA, TC, RA, AD, Z.
    out_flags = QR_BIT | (flags & 0x7800) | (flags & 0x0100) | (flags & 0x0010) | rcode
    return struct.pack("!HHHHHH", ident, out_flags, 0, 0, 0, 0)
