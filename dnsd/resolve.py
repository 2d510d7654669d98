"""The per-query pipeline: wire bytes in, wire bytes out. Synchronous; never raises.

    resolve(wire, client, snap, health, rng, now) -> bytes | None

`answer_query` is the same pipeline on a parsed query; it also returns the steering
decision, which is what `dnsd explain` prints (one code path for both).

Rcode contract (what each kind of input gets):
* fewer than 12 bytes, or a response (QR=1): None, a deliberate drop the caller counts;
* opcode other than QUERY: NOTIMP;
* a header that parses but a body that does not (bad labels, pointer loops, truncated
  records), QDCOUNT ≠ 1, several OPT records: FORMERR;
* EDNS version > 0: BADVERS (RFC 6891 §6.1.3); a malformed Client Subnet option: FORMERR;
* class other than IN, zone transfers, names outside every zone: REFUSED;
* an unexpected exception while answering: SERVFAIL (and the caller logs it).
UDP replies larger than the client allows (512 bytes without EDNS, else its payload size,
capped at our advertised 1232) are sent empty with TC=1 so the client retries over TCP.
"""

from __future__ import annotations

import ipaddress
import logging
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from dnslib import (
    AAAA,
    CNAME,
    EDNS0,
    OPCODE,
    QTYPE,
    RCODE,
    RR,
    A,
    DNSHeader,
    DNSLabel,
    DNSQuestion,
    DNSRecord,
    EDNSOption,
)

from dnsd.geo.ecs import ECS_OPTION, ClientSubnet, EcsError, parse_ecs
from dnsd.health.view import HealthView
from dnsd.snapshot import Snapshot
from dnsd.steering import LbDecision, SteeringInputs, steer
from dnsd.steering.client import ClientInfo, client_info
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
    ecs: ClientSubnet | None


@dataclass(slots=True)
class QueryResult:
    reply: DNSRecord
    edns: Edns | None
    decision: LbDecision | None = None
    client: ClientInfo | None = None


class FormErr(Exception):
    """The query is malformed in a way that gets FORMERR."""


# Told of every load-balanced answer: (load balancer, pool that answered, client region,
# whether the fallback answered because nothing was healthy). Metrics count these.
DecisionObserver = Callable[[str, str | None, str | None, bool], None]


def resolve(
    wire: bytes,
    client: Client,
    snap: Snapshot,
    health: HealthView,
    rng: random.Random,
    now: float,
    on_decision: DecisionObserver | None = None,
) -> bytes | None:
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
        result = answer_query(query, client.address, snap, health, rng, now)
    except FormErr:
        return _header_only(ident, flags, RCODE.FORMERR)
    except Exception:
        log.exception("SERVFAIL for query %s from %s", query.q.qname, client.address)
        return _servfail(query, ident, flags)
    if on_decision is not None and result.decision is not None and result.client is not None:
        decision, inner = result.decision, result.decision.innermost()
        fail_open = decision.fail_open or inner.fail_open
        on_decision(decision.lb, inner.pool, result.client.location.region, fail_open)
    return _pack(result.reply, client.transport, result.edns, question_bytes(wire))


def answer_query(
    query: DNSRecord,
    source: ipaddress.IPv4Address | ipaddress.IPv6Address,
    snap: Snapshot,
    health: HealthView,
    rng: random.Random,
    now: float,
) -> QueryResult:
    """The reply for a parsed query (not yet sized for UDP), with the steering decision."""
    if len(query.questions) != 1 or not _valid_name(query.q.qname):
        raise FormErr
    edns = _edns(query)
    reply = _reply_for(query, edns)
    result = QueryResult(reply, edns)
    opts = [rr for rr in query.ar if rr.rtype == QTYPE.OPT]
    if opts and (opts[0].ttl >> 16) & 0xFF:
        reply.header.rcode = 0
        reply.ar = [EDNS0(udp_len=EDNS_PAYLOAD, ext_rcode=BADVERS >> 4)]
        return result
    qtype, qclass = query.q.qtype, query.q.qclass
    if qclass not in (CLASS_IN, CLASS_ANY) or qtype in REFUSED_QTYPES:
        reply.header.rcode = RCODE.REFUSED
    elif qtype == QTYPE.OPT:
        reply.header.rcode = RCODE.FORMERR
    else:
        found = lookup(snap, str(query.q.qname).lower(), qtype)
        if found.lb is not None:
            ecs = edns.ecs if edns else None
            use_ecs = ecs is not None and ecs.source_prefix > 0
            address = ecs.address if use_ecs and ecs else source
            result.client = client_info(
                snap, address, ecs.source_prefix if use_ecs and ecs else None
            )
            inputs = SteeringInputs(snap, health, result.client, rng, now)
            steered_type = QTYPE.A if qtype == QTYPE.ANY else qtype
            result.decision = steer(inputs, found.lb, steered_type)
        _fill(reply, found, query, result.decision)
    _echo_ecs(result)
    return result


def _edns(query: DNSRecord) -> Edns | None:
    opts = [rr for rr in query.ar if rr.rtype == QTYPE.OPT]
    if not opts:
        return None
    if len(opts) > 1 or str(opts[0].rname) != ".":
        raise FormErr
    ecs_options = [o for o in opts[0].rdata if o.code == ECS_OPTION]
    if len(ecs_options) > 1:
        raise FormErr
    try:
        ecs = parse_ecs(ecs_options[0].data) if ecs_options else None
    except EcsError:
        raise FormErr from None
    return Edns(max(PLAIN_UDP_LIMIT, opts[0].rclass), bool(opts[0].ttl & 0x8000), ecs)


def _echo_ecs(result: QueryResult) -> None:
    """RFC 7871 §7.2: echo ECS; the scope is the prefix the answer depended on, else 0."""
    edns = result.edns
    if edns is None or edns.ecs is None or result.reply.header.rcode == RCODE.FORMERR:
        return
    scope = 0
    if result.decision is not None and result.client is not None and result.client.ecs_prefix:
        prefixes = result.decision.all_scope_prefixes()
        scope = max(prefixes) if prefixes else 0
    for rr in result.reply.ar:
        if rr.rtype == QTYPE.OPT:
            rr.rdata.append(EDNSOption(ECS_OPTION, edns.ecs.echo(scope)))


def _reply_for(query: DNSRecord, edns: Edns | None) -> DNSRecord:
    """The reply skeleton. The question is rendered in lower case (so name compression is
    the same whatever the query's 0x20 case) and `_pack` copies the query's case back into
    the question; names that point at it show that case too. OPT goes last (see _pack)."""
    h = query.header
    header = DNSHeader(id=h.id, qr=1, opcode=h.opcode, rd=h.rd, cd=h.cd, ra=0, aa=0)
    question = DNSQuestion(DNSLabel(str(query.q.qname).lower()), query.q.qtype, query.q.qclass)
    reply = DNSRecord(header, q=question)
    if edns is not None:
        reply.add_ar(EDNS0(udp_len=EDNS_PAYLOAD, flags="do" if edns.do else ""))
    return reply


def _fill(reply: DNSRecord, result: Lookup, query: DNSRecord, decision: LbDecision | None) -> None:
    reply.header.rcode = result.rcode
    reply.header.aa = int(result.authoritative)
    qname = reply.q.qname  # lower case: owners become pointers to the question (see _reply_for)
    for part in result.answer:
        owner = qname if part.owner is None else DNSLabel(part.owner)
        for rr in part.rrset.records:
            reply.add_answer(RR(owner, rr.rtype, ttl=part.rrset.ttl, rdata=rr.rdata))
    if decision is not None:
        owner = qname if result.lb_owner is None else DNSLabel(result.lb_owner)
        qtype = QTYPE.A if query.q.qtype == QTYPE.ANY else query.q.qtype
        final = decision.innermost()
        if final.cname:
            reply.add_answer(RR(owner, QTYPE.CNAME, ttl=decision.ttl, rdata=CNAME(final.cname)))
        for address in final.addresses:
            rdata = AAAA(address) if qtype == QTYPE.AAAA else A(address)
            reply.add_answer(RR(owner, qtype, ttl=decision.ttl, rdata=rdata))
        if not final.cname and not final.addresses:
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


def _pack(reply: DNSRecord, transport: str, edns: Edns | None, question: bytes = b"") -> bytes:
    """Wire bytes: OPT last in the additional section (the answer cache appends the ECS
    echo there), the query's question bytes (its case) copied in, truncated for UDP."""
    reply.ar = [rr for rr in reply.ar if rr.rtype != QTYPE.OPT] + [
        rr for rr in reply.ar if rr.rtype == QTYPE.OPT
    ]
    wire = reply.pack()
    if transport != "tcp":
        limit = min(edns.payload, EDNS_PAYLOAD) if edns else PLAIN_UDP_LIMIT
        if len(wire) > limit:
            reply.header.tc = 1
            reply.rr, reply.auth = [], []
            reply.ar = [rr for rr in reply.ar if rr.rtype == QTYPE.OPT]
            wire = reply.pack()
    if question and wire[12 : 12 + len(question)].lower() == question.lower():
        wire = wire[:12] + question + wire[12 + len(question) :]
    return bytes(wire)  # dnslib packs a bytearray; replies are immutable bytes everywhere


def question_bytes(wire: bytes) -> bytes:
    """The query's question name as sent (uncompressed labels), or b"" if it is unusual."""
    pos = 12
    end = len(wire)
    while pos < end:
        length = wire[pos]
        if length == 0:
            return wire[12 : pos + 1]
        if length & 0xC0:
            return b""
        pos += length + 1
    return b""


def _valid_name(label: DNSLabel) -> bool:
    """RFC 1035 §2.3.4: labels of at most 63 octets, names of at most 255 on the wire."""
    return all(0 < len(part) <= 63 for part in label.label) and (
        sum(len(part) + 1 for part in label.label) + 1 <= 255
    )


def _servfail(query: DNSRecord, ident: int, flags: int) -> bytes:
    try:
        reply = _reply_for(query, None)
        reply.header.rcode = RCODE.SERVFAIL
        return bytes(reply.pack())
    except Exception:
        return _header_only(ident, flags, RCODE.SERVFAIL)


def _header_only(ident: int, flags: int, rcode: int) -> bytes:
    # Keep opcode, RD and CD from the query; set QR; clear AA, TC, RA, AD, Z.
    out_flags = QR_BIT | (flags & 0x7800) | (flags & 0x0100) | (flags & 0x0010) | rcode
    return struct.pack("!HHHHHH", ident, out_flags, 0, 0, 0, 0)
