"""The per-query pipeline: wire bytes in, wire bytes out. Synchronous; never raises.

    resolve(Request(wire, client, snap, health, rng, now)) -> bytes | None

`answer_query` is the same pipeline on a parsed query; it also returns the steering
decision, which is what `dnsd explain` prints (one code path for both).

Rcode contract (what each kind of input gets):
* fewer than 12 bytes, or a response (QR=1): None, a deliberate drop the caller counts;
* opcode other than QUERY: NOTIMP;
* a header that parses but a body that does not (bad labels, pointer loops, truncated
  records), QDCOUNT ≠ 1, several OPT records, a question for OPT or NXNAME (RFC 9824
  §3.5): FORMERR;
* EDNS version > 0: BADVERS (RFC 6891 §6.1.3); a malformed Client Subnet option: FORMERR;
* class other than IN, zone transfers over UDP, names outside every zone: REFUSED (TCP
  transfers are answered by dnsd.xfr.service);
* a TSIG-signed query: checked, then answered and signed; NOTAUTH with the TSIG error
  when the signature does not check (dnsd.xfr.tsig);
* an unexpected exception while answering: SERVFAIL (and the caller logs it).
UDP replies larger than the client allows (512 bytes without EDNS, else its payload size,
capped at our advertised 1232) are sent empty with TC=1 so the client retries over TCP.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Final

from dnslib import EDNS0, OPCODE, QTYPE, RCODE, DNSHeader, DNSLabel, DNSRecord

from dnsd.dnssec.signer import sign_reply
from dnsd.query_view import QueryView, view_of
from dnsd.ratelog import RateLimitedLog
from dnsd.reply import (
    BADVERS,
    CLASS_ANY,
    CLASS_IN,
    EDNS_PAYLOAD,
    QR_BIT,
    Edns,
    FormErr,
    QueryResult,
    Signer,
    echo_cookie,
    echo_ecs,
    fill,
    header_only,
    lookup_name,
    pack,
    reply_for,
)
from dnsd.request import Request
from dnsd.snapshot import CompiledZone, Snapshot
from dnsd.steering import SteeringInputs, steer
from dnsd.steering.client import client_info, locating_address, steered_type
from dnsd.steering.hints import steer_hints
from dnsd.xfr import tsig
from dnsd.zone_lookup import SVC_TYPES, lookup

log = logging.getLogger("dnsd.resolve")
SERVFAIL_LOG = RateLimitedLog(log)  # strangers choose the queries: bounded log
TSIG_LOG = RateLimitedLog(log)
TSIG_TYPE: Final = 250

REFUSED_QTYPES: Final = frozenset({QTYPE.AXFR, QTYPE.IXFR})
FORMERR_QTYPES: Final = frozenset({QTYPE.OPT, 128})  # 128: NXNAME (RFC 9824 §3.5)


def resolve(request: Request) -> bytes | None:
    wire, client, now = request.wire, request.client, request.now
    view = view_of(wire)
    if view is None:
        return None
    ident, flags = view.ident, view.flags
    if flags & QR_BIT:
        return None
    opcode = (flags >> 11) & 0xF
    if opcode != OPCODE.QUERY:
        return header_only(ident, flags, RCODE.NOTIMP)
    try:
        query = DNSRecord.parse(wire)
    except Exception:  # dnslib raises many kinds of exception on bad input
        return header_only(ident, flags, RCODE.FORMERR)
    if view.edns_error:  # a malformed OPT or option (an empty COOKIE, say): before TSIG
        return header_only(ident, flags, RCODE.FORMERR)
    if query.ar and query.ar[-1].rtype == TSIG_TYPE:
        return _signed(request, query, view)
    try:
        result = answer_query(query, request, view)
        reply = pack(result.reply, client.transport, result.edns, view.qname or b"", result.sign)
    except FormErr:
        return header_only(ident, flags, RCODE.FORMERR)
    except Exception:  # a bug costs one answer and a bounded amount of log
        SERVFAIL_LOG.log(
            now,
            logging.ERROR,
            "SERVFAIL for query %r from %s",
            query.q.qname.label,
            client.address,
            exc_info=True,
        )
        return _servfail(query, ident, flags)
    on_decision = request.on_decision
    if on_decision is not None and result.answer is not None and result.client is not None:
        answer, region = result.answer, result.client.location.region
        on_decision(answer.lb, answer.outcome.pool, region, answer.by_fallback)
    return reply


def answer_query(query: DNSRecord, request: Request, view: QueryView | None = None) -> QueryResult:
    """The reply for a parsed query (not yet sized for UDP), with the steering decision.
    `view`: the query view of `request.wire` (made here when not given)."""
    source, snap, now = request.client.address, request.snap, request.now
    view = view or view_of(request.wire)
    if view is None or view.edns_error:
        raise FormErr
    edns = view.edns
    if not query.questions and query.header.q == 0:
        return _cookie_only(query, edns, source, snap, now)
    if len(query.questions) != 1 or not _valid_name(query.q.qname):
        raise FormErr
    reply = reply_for(query, edns)
    result = QueryResult(reply, edns)
    if view.opts and view.opts[0].version:
        reply.header.rcode = 0
        reply.ar = [EDNS0(udp_len=EDNS_PAYLOAD, ext_rcode=BADVERS >> 4)]
        return result
    qtype, qclass = query.q.qtype, query.q.qclass
    if qclass not in (CLASS_IN, CLASS_ANY) or qtype in REFUSED_QTYPES:
        reply.header.rcode = RCODE.REFUSED
    elif qtype in FORMERR_QTYPES:
        reply.header.rcode = RCODE.FORMERR
    else:
        found = lookup(snap, lookup_name(query.q.qname), qtype)
        if found.lb is not None:
            address, ecs_prefix = locating_address(source, edns.ecs if edns else None)
            result.client = client_info(snap, address, ecs_prefix)
            inputs = SteeringInputs(snap, request.health, result.client, request.rng, now)
            if qtype in SVC_TYPES:  # docs/steering.md, HTTPS and SVCB at a load-balanced name
                result.decision = steer_hints(inputs, found.lb, qtype)
            else:
                result.decision = steer(inputs, found.lb, steered_type(qtype))
            result.answer = result.decision.answer
        fill(reply, found, query, result.answer)
        result.sign = signer_for(snap, found.zone, edns, now)
    echo_ecs(result)
    echo_cookie(result, snap.node.cookies, source, now)
    return result


def _signed(request: Request, query: DNSRecord, view: QueryView) -> bytes:
    """A query signed with TSIG (a secondary's SOA check, say): checked, answered as any
    query, and the reply signed with the same key (RFC 8945 §5.3); NOTAUTH when the
    signature does not check."""
    wire, client, now = request.wire, request.client, request.now
    ident, flags = view.ident, view.flags
    try:
        checked = tsig.check(wire, request.snap.tsig_keyring, now)
    except tsig.TsigFailure as failure:
        TSIG_LOG.log(
            now, logging.WARNING, "%s from %s: NOTAUTH", failure.describe(), client.address
        )
        return failure.reply
    except Exception:  # dnspython's view of a malformed message
        return header_only(ident, flags, RCODE.FORMERR)
    query.ar.pop()  # the TSIG record: answer the query it signed
    try:
        result = answer_query(query, request, view)
        reply = pack(result.reply, client.transport, result.edns, view.qname or b"", result.sign)
        return tsig.sign(reply, checked)
    except FormErr:
        return header_only(ident, flags, RCODE.FORMERR)
    except Exception:
        SERVFAIL_LOG.log(
            now, logging.ERROR, "SERVFAIL for a signed query from %s", client.address, exc_info=True
        )
        return _servfail(query, ident, flags)


def signer_for(
    snap: Snapshot, zone: CompiledZone | None, edns: Edns | None, now: float
) -> Signer | None:
    """How to sign the reply: a DO=1 query answered from a signed zone, else None."""
    if edns is None or not edns.do or zone is None:
        return None
    keys = snap.signing.get(zone.name)
    if keys is None:
        return None
    return lambda wire: sign_reply(wire, zone, keys, now, edns.co)


def _cookie_only(
    query: DNSRecord,
    edns: Edns | None,
    source: ipaddress.IPv4Address | ipaddress.IPv6Address,
    snap: Snapshot,
    now: float,
) -> QueryResult:
    """RFC 7873 §5.4: a query with no question but a COOKIE option learns a server cookie."""
    if edns is None or edns.cookie is None:
        raise FormErr
    header = DNSHeader(id=query.header.id, qr=1, opcode=query.header.opcode, rd=query.header.rd)
    result = QueryResult(DNSRecord(header), edns)
    result.reply.add_ar(EDNS0(udp_len=EDNS_PAYLOAD, flags="do" if edns.do else ""))
    echo_cookie(result, snap.node.cookies, source, now)
    return result


def _valid_name(label: DNSLabel) -> bool:
    """RFC 1035 §2.3.4: labels of at most 63 octets, names of at most 255 on the wire."""
    return all(0 < len(part) <= 63 for part in label.label) and (
        sum(len(part) + 1 for part in label.label) + 1 <= 255
    )


def _servfail(query: DNSRecord, ident: int, flags: int) -> bytes:
    try:
        reply = reply_for(query, None)
        reply.header.rcode = RCODE.SERVFAIL
        return bytes(reply.pack())
    except Exception:
        return header_only(ident, flags, RCODE.SERVFAIL)
