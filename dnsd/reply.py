"""Reply wire helpers shared by the full answer path (`resolve.py`) and the answer cache
(`dnsd.fastpath`): the reply skeleton, filling it from a lookup and a steering
decision, the ECS and COOKIE echoes, and packing with truncation for UDP. The query itself
is read once, by dnsd.query_view.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from dnslib import (
    AAAA,
    CNAME,
    EDNS0,
    QTYPE,
    RCODE,
    RD,
    RR,
    A,
    DNSHeader,
    DNSLabel,
    DNSQuestion,
    DNSRecord,
    EDNSOption,
)

from dnsd.cookies import COOKIE_OPTION, ServerCookies
from dnsd.dnsname import key_of_labels, name_end, to_label
from dnsd.geo.ecs import ECS_OPTION
from dnsd.query_view import PLAIN_UDP_LIMIT, Edns
from dnsd.rdata import SVC_TYPES, to_wire, with_hints
from dnsd.steering import LbDecision
from dnsd.steering.client import ClientInfo
from dnsd.steering.records import LbAnswer, decision_records
from dnsd.zone_lookup import Lookup

EDNS_PAYLOAD: Final = 1232  # advertised UDP payload (DNS flag day 2020 value)
BADVERS: Final = 16
QR_BIT: Final = 0x8000
CLASS_IN: Final = 1
CLASS_ANY: Final = 255


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# A load balancer's records (dnsd.steering.records) as dnslib RDATA, by type.
_LB_RDATA: Final[dict[int, Callable[[str], A | AAAA | CNAME]]] = {
    QTYPE.A: A,
    QTYPE.AAAA: AAAA,
    QTYPE.CNAME: CNAME,
}


@dataclass(frozen=True, slots=True)
class Client:
    address: ipaddress.IPv4Address | ipaddress.IPv6Address
    transport: Literal["udp", "tcp"]


# Signs a finished reply (dnsd.dnssec.signer.sign_reply bound to a zone, its keys, the time).
Signer = Callable[[bytes], bytes]


@dataclass(slots=True)
class QueryResult:
    reply: DNSRecord
    edns: Edns | None
    answer: LbAnswer | None = None  # steering's decision at a load-balanced name
    decision: LbDecision | None = None  # its explanation (for `explain`)
    client: ClientInfo | None = None
    sign: Signer | None = None  # DO=1 in a signed zone


class FormErr(Exception):
    """The query is malformed in a way that gets FORMERR."""


def echo_ecs(result: QueryResult) -> None:
    """RFC 7871 §7.2: echo ECS; the scope is the prefix the answer depended on, else 0."""
    edns = result.edns
    if edns is None or edns.ecs is None or result.reply.header.rcode == RCODE.FORMERR:
        return
    scope = 0
    if result.answer is not None and result.client is not None and result.client.ecs_prefix:
        scope = result.answer.outcome.scope
    for rr in result.reply.ar:
        if rr.rtype == QTYPE.OPT:
            rr.rdata.append(EDNSOption(ECS_OPTION, edns.ecs.echo(scope)))


def echo_cookie(
    result: QueryResult, cookies: ServerCookies | None, address: IPAddress, now: float
) -> bool:
    """RFC 7873 §5.2: a client cookie gets its cookie back with a fresh server cookie.
    Returns whether the query carried a valid server cookie (it is then spared RRL)."""
    edns = result.edns
    if cookies is None or edns is None or edns.cookie is None:
        return False
    client_cookie, server_cookie = edns.cookie
    valid = bool(server_cookie) and cookies.valid(client_cookie, server_cookie, address, now)
    option = EDNSOption(COOKIE_OPTION, client_cookie + cookies.make(client_cookie, address, now))
    for rr in result.reply.ar:
        if rr.rtype == QTYPE.OPT:
            rr.rdata.append(option)
    return valid


def reply_for(query: DNSRecord, edns: Edns | None) -> DNSRecord:
    """The reply skeleton. The question is rendered in lower case (so name compression is
    the same whatever the query's 0x20 case) and `pack` copies the query's case back into
    the question; names that point at it show that case too. OPT goes last (see pack).
    `edns`: the query view's (dnsd.query_view), the only reader of the query's OPT."""
    h = query.header
    header = DNSHeader(id=h.id, qr=1, opcode=h.opcode, rd=h.rd, cd=h.cd, ra=0, aa=0)
    lowered = DNSLabel([label.lower() for label in query.q.qname.label])  # labels kept as sent
    question = DNSQuestion(lowered, query.q.qtype, query.q.qclass)
    reply = DNSRecord(header, q=question)
    if edns is not None:
        reply.add_ar(EDNS0(udp_len=EDNS_PAYLOAD, flags="do" if edns.do else ""))
    return reply


def lookup_name(qname: DNSLabel) -> str:
    """The lower-case text the zone lookup uses: "www.example.test.", a name with other
    bytes in dnspython's escaped form (dnsd.dnsname: the same keys the zone tree holds)."""
    return key_of_labels(qname.label)


def fill(
    reply: DNSRecord,
    result: Lookup,
    query: DNSRecord,
    decision: LbAnswer | None,
    make_rr: Callable[..., Any] = RR,
) -> None:
    """The answer, authority and additional records of `result` (and of the load
    balancer's `decision`) into `reply`, each made by `make_rr(name, type, ttl=, rdata=)`:
    dnslib's RR, or the zone tables' lighter one (dnsd.zone_tables.templates)."""
    rule = decision.outcome.all_down if decision is not None else None
    if rule == "servfail":  # docs/steering.md, when all pools are down: no data at all
        reply.header.rcode, reply.header.aa = RCODE.SERVFAIL, 0
        return
    reply.header.rcode = result.rcode
    reply.header.aa = int(result.authoritative)
    negative_ttl = result.zone.negative_ttl if result.zone is not None else 0
    qname = reply.q.qname  # lower case: owners become pointers to the question (see reply_for)
    hints = decision.svc_hints() if decision is not None else None
    for part in result.answer:
        owner = qname if part.owner is None else to_label(part.owner)
        rrset = part.rrset
        ttl = rrset.ttl
        if hints is not None and decision is not None and rrset.rtype in SVC_TYPES:
            ttl = decision.ttl  # steered hints live as long as the steered addresses
        for rdata in rrset.rdatas:
            if hints is not None and rrset.rtype in SVC_TYPES:  # docs/steering.md, HTTPS hints
                rdata = RD(with_hints(rrset.rtype, to_wire(rdata), *hints))
            reply.add_answer(make_rr(owner, rrset.rtype, ttl=ttl, rdata=rdata))
    if decision is not None and hints is None:
        owner = qname if result.lb_owner is None else to_label(result.lb_owner)
        records = decision_records(decision, query.q.qtype)
        for record in records:
            rdata = _LB_RDATA[record.rtype](record.value)
            reply.add_answer(make_rr(owner, record.rtype, ttl=record.ttl, rdata=rdata))
        if not records:
            result.negative = True
            if rule == "closed":  # a resolver asks again after the LB's TTL, not the zone's
                negative_ttl = decision.ttl
    for rrset in result.authority:
        label = to_label(rrset.owner)
        for rdata in rrset.rdatas:
            reply.add_auth(make_rr(label, rrset.rtype, ttl=rrset.ttl, rdata=rdata))
    if result.negative and result.zone is not None:
        soa = result.zone.soa
        reply.add_auth(make_rr(soa.rname, QTYPE.SOA, ttl=negative_ttl, rdata=soa.rdata))
    for rrset in result.additional:
        label = to_label(rrset.owner)
        for rdata in rrset.rdatas:
            reply.add_ar(make_rr(label, rrset.rtype, ttl=rrset.ttl, rdata=rdata))


def pack(
    reply: DNSRecord,
    transport: str,
    edns: Edns | None,
    question: bytes = b"",
    sign: Signer | None = None,
) -> bytes:
    """Wire bytes: OPT last in the additional section (the answer cache appends the ECS
    echo there), signed when asked (DNSSEC), the query's question bytes (its case) copied
    in, truncated for UDP — a signed reply too large goes out empty with TC=1."""
    reply.ar = [rr for rr in reply.ar if rr.rtype != QTYPE.OPT] + [
        rr for rr in reply.ar if rr.rtype == QTYPE.OPT
    ]
    wire = reply.pack()
    if sign is not None:
        wire = sign(bytes(wire))
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


def header_only(ident: int, flags: int, rcode: int) -> bytes:
    # Keep opcode, RD and CD from the query; set QR; clear AA, TC, RA, AD, Z.
    out_flags = QR_BIT | (flags & 0x7800) | (flags & 0x0100) | (flags & 0x0010) | rcode
    return struct.pack("!HHHHHH", ident, out_flags, 0, 0, 0, 0)


def count_key(reply: bytes) -> bytes:
    """What a reply is counted under: its flags and rcode (bytes 2..4) and its question's
    type (2 bytes, empty when there is none): the same key for any name length."""
    if len(reply) < 12 or reply[4:6] != b"\x00\x01":
        return reply[2:4]
    pos = name_end(reply, 12)
    if pos is None or pos + 2 > len(reply):
        return reply[2:4]
    return reply[2:4] + reply[pos : pos + 2]
