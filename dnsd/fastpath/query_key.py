"""The key of a query the answer cache can reuse an answer for: a query of the usual shape
(QUERY, one uncompressed question, at most one OPT of version 0), by its lower-case name,
type, class and EDNS shape (DO/CO, the UDP size class, ECS present, COOKIE present)."""

from __future__ import annotations

from typing import Any, NamedTuple

from dnslib import QTYPE

from dnsd.dnsname import NAME_BYTES, key_of_labels, wire_labels
from dnsd.geo.ecs import ClientSubnet
from dnsd.query_view import view_of
from dnsd.reply import EDNS_PAYLOAD, PLAIN_UDP_LIMIT

_new = tuple.__new__


class Parsed(NamedTuple):  # made per query: by tuple.__new__ (`_new`), the quickest
    qname: bytes  # as sent
    qtype: int
    qclass: int
    key: tuple[Any, ...]
    ecs: ClientSubnet | None
    cookie: bytes | None = None  # the client cookie (the server cookie sent is not needed)


def parse(wire: bytes, transport: str) -> Parsed | None:
    """The common query shape (dnsd.query_view's `usual`), or None (then the full path
    decides, FORMERR included)."""
    view = view_of(wire)
    if view is None or not view.usual:
        return None
    qname, qtype, qclass, edns = view.qname or b"", view.qtype, view.qclass, view.edns
    if len(qname) > 255:
        return None
    if edns is None:
        limit = "tcp" if transport == "tcp" else PLAIN_UDP_LIMIT
        return _new(Parsed, (qname, qtype, qclass, (qname.lower(), qtype, qclass, limit, None),
                             None, None))  # fmt: skip
    limit = "tcp" if transport == "tcp" else min(edns.payload, EDNS_PAYLOAD)
    cookie = edns.cookie[0] if edns.cookie is not None else None  # the client's cookie
    shape = (view.opts[0].flags & 0xC000, edns.ecs is not None, cookie is not None)  # DO, CO
    key = (qname.lower(), qtype, qclass, limit, shape)
    return _new(Parsed, (qname, qtype, qclass, key, edns.ecs, cookie))


def name_text(qname: bytes) -> str | None:
    """Wire labels → "www.example.test." in lower case; None for bytes no config name has."""
    labels = wire_labels(qname)
    if not all(set(label) <= NAME_BYTES for label in labels):
        return None
    return key_of_labels(labels)


def plain_class(parsed: Parsed) -> bool:
    return parsed.qclass in (1, 255) and parsed.qtype not in (QTYPE.AXFR, QTYPE.IXFR, QTYPE.OPT)
