"""The query view: one parse of a query's wire — header, question, OPT and its options —
made once per query. The answer path, the answer cache, RRL, cookies and DNSSEC read this
instead of walking the wire again; EDNS options are read here and nowhere else (their
contents by the modules that define them: dnsd.cookies, dnsd.geo.ecs).

Malformation is a value, not an exception: `edns_error` says the OPT record or one of its
options is malformed (RFC 6891 §6.1.1, RFC 7871 §7.1.1, RFC 7873 §5.2.2), and the full path
(dnsd.resolve) turns it into FORMERR where it always has. The compiled loop
(dnsd/_fastloop.c) reads the same fields of the queries it answers by itself (no options:
every query with an option comes here), as its mirror.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final, NamedTuple

from dnsd.cookies import COOKIE_OPTION, CookieFormErr
from dnsd.cookies import split as split_cookie
from dnsd.dnsname import name_end
from dnsd.geo.ecs import ECS_OPTION, ClientSubnet, EcsError, parse_ecs

OPT_TYPE: Final = 41
PLAIN_UDP_LIMIT: Final = 512
DO_FLAG: Final = 0x8000
CO_FLAG: Final = 0x4000  # "compact answers OK" (RFC 9824 §4)
_HEADER = struct.Struct("!HHHHHH")
_RR = struct.Struct("!HHIH")
_QUESTION = struct.Struct("!HH")
_OPTION = struct.Struct("!HH")


class Edns(NamedTuple):
    payload: int
    do: bool
    ecs: ClientSubnet | None
    cookie: tuple[bytes, bytes] | None = None  # (client cookie, server cookie or b"")
    co: bool = False  # "compact answers OK" (RFC 9824 §4): signed denial keeps NXDOMAIN


# NamedTuples, not dataclasses: one is made per query, and `_new` makes one in one step
# (tuple.__new__, without the generated __new__'s Python call: a third of the cost).
class Opt(NamedTuple):
    """One OPT record as sent (RFC 6891 §6.1.2)."""

    root: bool  # owned by the root name, as it must be
    payload: int  # the UDP payload size field, unclamped
    version: int
    flags: int  # DO, CO and the rest of the 16 flag bits
    options: tuple[tuple[int, bytes], ...]  # (code, data) in the order sent
    exact: bool  # the options fill the RDATA exactly (no stray bytes after the last)


class QueryView(NamedTuple):
    ident: int
    flags: int  # the header's second 16 bits: QR, opcode, AA, TC, RD, RA, Z, AD, CD, rcode
    qdcount: int
    ancount: int
    nscount: int
    arcount: int
    qname: bytes | None  # the first question's name as sent; None: no question, or compressed
    qtype: int
    qclass: int
    end: int  # where the first question ends (12 without one)
    records_end: int | None  # where the last record ends; None: the records are cut short
    opts: tuple[Opt, ...]  # every OPT record of the additional section
    edns: Edns | None  # what the OPT record asks (None: no OPT, or `edns_error`)
    edns_error: bool  # several OPT records, or a malformed OPT or option: FORMERR
    # The shape the answer tables and caches serve: QUERY, one question as sent with no
    # compression, no answer or authority records, at most one OPT (owned by the root,
    # version 0, options that parse and fill it) and nothing after the records.
    usual: bool

    @property
    def opcode(self) -> int:
        return (self.flags >> 11) & 0xF


_new = tuple.__new__


def view_of(wire: bytes) -> QueryView | None:
    """The view of a query of at least a header, else None (too short to be one)."""
    n = len(wire)
    if n < 12:
        return None
    ident, flags, qd, an, ns, ar = _HEADER.unpack_from(wire)
    if qd == 1 and not an and not ns and ar <= 1:  # the usual shape: no loops
        end = name_end(wire, 12, pointers=False)
        if end is not None and end + 4 <= n:
            qname = bytes(wire[12:end])
            qtype, qclass = _QUESTION.unpack_from(wire, end)
            end += 4
            if not ar:
                usual = end == n and not flags & 0xF800
                return _new(QueryView, (ident, flags, 1, 0, 0, 0, qname, qtype, qclass, end,
                                        end, (), None, False, usual))  # fmt: skip
            if end + 11 <= n:
                rtype, rclass, ttl, rdlen = _RR.unpack_from(wire, end + 1)
                stop = end + 11 + rdlen
                if rtype == OPT_TYPE and stop == n == end + 11 and not wire[end]:  # no options
                    version, opt_flags = (ttl >> 16) & 0xFF, ttl & 0xFFFF
                    opt = _new(Opt, (True, rclass, version, opt_flags, (), True))
                    edns = (max(PLAIN_UDP_LIMIT, rclass), bool(opt_flags & DO_FLAG), None, None,
                            bool(opt_flags & CO_FLAG))  # fmt: skip
                    return _new(QueryView, (ident, flags, 1, 0, 0, 1, qname, qtype, qclass, end,
                                            n, (opt,), _new(Edns, edns), False,
                                            not flags & 0xF800 and not version))  # fmt: skip
                if rtype == OPT_TYPE and stop <= n and not wire[end]:
                    read = _opt(True, rclass, ttl, wire, end + 11, stop)
                    opts = (read,) if read is not None else ()
                    asked, error = _edns(opts, read is None)
                    usual = (
                        stop == n
                        and not flags & 0xF800
                        and not error
                        and read is not None
                        and read.version == 0
                        and read.exact
                    )
                    return _new(QueryView, (ident, flags, 1, 0, 0, 1, qname, qtype, qclass,
                                            end, stop, opts, asked, error, usual))  # fmt: skip
    return _general(wire, ident, flags, qd, an, ns, ar)


def _general(wire: bytes, ident: int, flags: int, qd: int, an: int, ns: int, ar: int) -> QueryView:
    """Any other query: every question and record walked."""
    n = len(wire)
    qname, qtype, qclass, end = None, 0, 0, 12
    pos: int | None = 12
    for index in range(qd):
        after = name_end(wire, pos, pointers=False)  # type: ignore[arg-type]
        plain = after is not None  # as sent, no compression (a question as usual)
        if not plain:
            after = name_end(wire, pos)  # type: ignore[arg-type]
        if after is None or after + 4 > n:
            pos = None
            break
        if index == 0:
            qname = bytes(wire[12:after]) if plain else None
            qtype, qclass = struct.unpack_from("!HH", wire, after)
            end = after + 4
        pos = after + 4
    opts: list[Opt] = []
    malformed = False
    for index in range(an + ns + ar):
        if pos is None:
            break
        after = name_end(wire, pos)
        if after is None or after + 10 > n:
            pos = None
            break
        rtype, rclass, ttl, rdlen = _RR.unpack_from(wire, after)
        rdata = after + 10
        if rdata + rdlen > n:
            pos = None
            break
        if rtype == OPT_TYPE and index >= an + ns:
            opt = _opt(_root(wire, pos), rclass, ttl, wire, rdata, rdata + rdlen)
            malformed = malformed or opt is None
            if opt is not None:
                opts.append(opt)
        pos = rdata + rdlen
    edns, error = _edns(opts, malformed)
    usual = (
        not flags & 0xF800
        and qd == 1
        and not an
        and not ns
        and ar == len(opts) <= 1
        and qname is not None
        and pos == n
        and not error
        and all(opt.root and opt.version == 0 and opt.exact for opt in opts)
    )
    asked = (ident, flags, qd, an, ns, ar, qname, qtype, qclass, end)
    return _new(QueryView, (*asked, pos, tuple(opts), edns, error, usual))


def _root(wire: bytes, owner: int) -> bool:
    """Whether the name at `owner` is the root (a pointer to a zero byte is too)."""
    first = wire[owner]
    if first & 0xC0 == 0xC0:
        target = (first & 0x3F) << 8 | wire[owner + 1]
        return target < len(wire) and wire[target] == 0
    return first == 0


def _opt(root: bool, rclass: int, ttl: int, wire: bytes, start: int, stop: int) -> Opt | None:
    """An OPT record's fields and options; None when an option runs past its RDATA."""
    if start == stop:  # no options: the usual OPT
        return _new(Opt, (root, rclass, (ttl >> 16) & 0xFF, ttl & 0xFFFF, (), True))
    options: list[tuple[int, bytes]] = []
    at = start
    while at + 4 <= stop:
        code, size = _OPTION.unpack_from(wire, at)
        if at + 4 + size > stop:
            return None
        options.append((code, bytes(wire[at + 4 : at + 4 + size])))
        at += 4 + size
    return Opt(root, rclass, (ttl >> 16) & 0xFF, ttl & 0xFFFF, tuple(options), at == stop)


def _edns(opts: Sequence[Opt], malformed: bool) -> tuple[Edns | None, bool]:
    """What the OPT record asks, or (None, True) when the query gets FORMERR for it."""
    if malformed or len(opts) > 1 or (opts and not opts[0].root):
        return None, True
    if not opts:
        return None, False
    opt = opts[0]
    options = opt.options
    if not options:
        flags = opt.flags
        do, co = bool(flags & DO_FLAG), bool(flags & CO_FLAG)
        edns = (max(PLAIN_UDP_LIMIT, opt.payload), do, None, None, co)
        return _new(Edns, edns), False
    # An empty option last in the RDATA is read as absent (the full path always read it
    # so; answers stay as they were) — but an empty COOKIE is FORMERR (RFC 7873 §5.2.2).
    if opt.exact and options and not options[-1][1] and options[-1][0] != COOKIE_OPTION:
        options = options[:-1]
    ecs_data = [data for code, data in options if code == ECS_OPTION]
    cookie_data = [data for code, data in options if code == COOKIE_OPTION]
    if len(ecs_data) > 1 or len(cookie_data) > 1:
        return None, True
    try:
        ecs = parse_ecs(ecs_data[0]) if ecs_data else None
        cookie = split_cookie(cookie_data[0]) if cookie_data else None
    except (EcsError, CookieFormErr):
        return None, True
    payload = max(PLAIN_UDP_LIMIT, opt.payload)
    return Edns(payload, bool(opt.flags & DO_FLAG), ecs, cookie, bool(opt.flags & CO_FLAG)), False
