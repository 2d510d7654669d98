"""The answer cache's replies: the full path's reply for a load-balanced decision, the
compact signed denial, and a reply made reusable (a template without what is written per
query: ID, RD/CD, the question's case, the ECS echo, the COOKIE option) and finished again
for the next query."""

from __future__ import annotations

import struct

from dnslib import QTYPE, RCODE, DNSRecord

from dnsd.cookies import COOKIE_OPTION
from dnsd.dnssec.denial import compact_nxdomain
from dnsd.fastpath.memo import Static
from dnsd.fastpath.query_key import Parsed
from dnsd.geo.ecs import ECS_OPTION
from dnsd.query_view import view_of
from dnsd.reply import (
    Client,
    QueryResult,
    echo_cookie,
    echo_ecs,
    fill,
    lookup_name,
    pack,
    reply_for,
)
from dnsd.request import Request
from dnsd.resolve import signer_for
from dnsd.snapshot import Snapshot
from dnsd.steering import ClientInfo
from dnsd.steering.records import LbAnswer
from dnsd.zone_lookup import Lookup, lookup

RD_CD = 0x0110
ECS_MAX = 4 + 4 + 16  # option header + family/prefixes + an IPv6 address
COOKIE_REPLY = 4 + 8 + 16  # option header + client cookie + the server cookie we make


def render(
    wire: bytes, client: Client, snap: Snapshot, answer: LbAnswer, info: ClientInfo,
    now: float,
) -> bytes:  # fmt: skip
    """The full path's reply for this query (of the usual shape, `parse`) and this decision
    (no draws here)."""
    query = DNSRecord.parse(wire)
    edns = view_of(wire).edns  # type: ignore[union-attr]
    reply = reply_for(query, edns)
    found = lookup(snap, lookup_name(query.q.qname), query.q.qtype)
    fill(reply, found, query, answer)
    result = QueryResult(reply, edns, answer, client=info)
    echo_ecs(result)
    echo_cookie(result, snap.node.cookies, client.address, now)
    return pack(reply, client.transport, edns, sign=signer_for(snap, found.zone, edns, now))


def compact_denial(query: Request, parsed: Parsed, found: Lookup) -> bytes | None:
    """A DO=1 query for a name a signed zone does not have: its signed denial made straight
    from the query bytes (dnsd.dnssec.denial, the same bytes as the full path), so a
    random-name flood costs one signature per query and nothing more."""
    zone = found.zone
    if (
        found.rcode != RCODE.NXDOMAIN or found.answer or zone is None
        or not parsed.key[4] or not parsed.key[4][0] & 0x8000
        or parsed.qtype in (QTYPE.NSEC, 128)  # NSEC: an answer; NXNAME: FORMERR
    ):  # fmt: skip
        return None
    keys = query.snap.signing.get(zone.name)
    if keys is None:
        return None
    echo = parsed.ecs.echo(0) if parsed.ecs is not None else None
    co = bool(parsed.key[4][0] & 0x4000)  # the query's CO flag (RFC 9824 §4)
    return compact_nxdomain(query.wire, parsed.qname, parsed.qtype, zone, keys, query.now,
                            echo, parsed.key[3], co)  # fmt: skip


def static_entry(reply: bytes | None, parsed: Parsed, cookie: bytes | None) -> Static | None:
    if reply is None or reply[2] & 0x02:  # nothing to reuse, or truncated (size-dependent)
        return None
    wire = reusable(reply, parsed, cookie)
    return None if wire is None else Static(wire)


def reusable(reply: bytes, parsed: Parsed, cookie: bytes | None) -> bytes | None:
    """The reply without what is written per query: the COOKIE option (`cookie`: the one
    echoed, which the full path writes last) and the ECS echo before it."""
    if cookie is None:
        return _strip_ecs(reply, parsed)
    without = _strip_cookie(reply, parsed, cookie)
    return None if without is None else _strip_ecs(without, parsed)


def _strip_cookie(reply: bytes, parsed: Parsed, cookie: bytes) -> bytes | None:
    """The reply without its last OPT option, the cookie echo, and OPT's RDLEN shortened to
    match; None when the reply does not end as expected (then it is not cached)."""
    echo = 4 + 4 + len(parsed.ecs.raw_address) if parsed.ecs is not None else 0
    at = len(reply) - COOKIE_REPLY - echo - 2  # OPT's RDLEN
    if (
        len(cookie) != COOKIE_REPLY
        or at < 12
        or reply[len(reply) - COOKIE_REPLY : len(reply) - 16] != cookie[:12]
        or struct.unpack_from("!H", reply, at)[0] != echo + COOKIE_REPLY
    ):
        return None
    out = bytearray(reply[:-COOKIE_REPLY])
    struct.pack_into("!H", out, at, echo)
    return bytes(out)


def cookie_echo(query: Request, parsed: Parsed) -> bytes | None:
    """The COOKIE option the reply to this query carries (RFC 7873 §5.2: the client's
    cookie and a fresh server cookie for this client), or None (no cookie, or the server
    does not answer cookies)."""
    cookies = query.snap.node.cookies
    if parsed.cookie is None or cookies is None:
        return None
    client = parsed.cookie
    server = cookies.make(client, query.client.address, query.now)
    return struct.pack("!HH", COOKIE_OPTION, len(client) + len(server)) + client + server


def _strip_ecs(reply: bytes, parsed: Parsed) -> bytes | None:
    """The reply without the ECS echo (OPT is last; its RDATA is the echo alone), with ID 0
    and RD/CD clear, ready for `finish`. None when an echo could make it too large."""
    if reply[2] & 0x02:
        return None
    out = bytearray(reply)
    out[0:2] = b"\x00\x00"
    out[2] &= ~(RD_CD >> 8) & 0xFF
    out[3] &= ~(RD_CD & 0xFF) & 0xFF
    if parsed.ecs is not None:
        echo = 4 + 4 + len(parsed.ecs.raw_address)
        del out[len(out) - echo :]
        out[len(out) - 2 : len(out)] = b"\x00\x00"  # OPT RDLEN: the echo is written per query
    limit = parsed.key[3]
    room = ECS_MAX + (COOKIE_REPLY if parsed.cookie is not None else 0)
    if limit != "tcp" and len(out) + room > limit:
        return None
    return bytes(out)


def finish(
    template: bytes, wire: bytes, parsed: Parsed, scope: int, cookie: bytes | None = None
) -> bytes:
    out = bytearray(template)
    out[0:2] = wire[0:2]
    out[2] |= wire[2] & (RD_CD >> 8)
    out[3] |= wire[3] & (RD_CD & 0xFF)
    out[12 : 12 + len(parsed.qname)] = parsed.qname
    options = b""
    if parsed.ecs is not None:
        echo = parsed.ecs.echo(scope)
        options = struct.pack("!HH", ECS_OPTION, len(echo)) + echo
    if cookie is not None:  # after the ECS echo, as the full path writes them
        options += cookie
    if options:
        out[len(out) - 2 : len(out)] = struct.pack("!H", len(options))  # OPT RDLEN (was 0)
        out += options
    return bytes(out)
