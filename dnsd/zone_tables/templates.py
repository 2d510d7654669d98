"""Zone answer tables: templates, made by the full path's own composer (lookup →
reply.fill → dnslib's pack), and the wire form of names."""

from __future__ import annotations

import struct
from typing import Final

from dnslib import QTYPE, RD, SOA, DNSBuffer, DNSLabel, DNSLabelError

from dnsd.dnsname import key_of_labels, to_label
from dnsd.reply import fill
from dnsd.zone_lookup import Lookup
from dnsd.zone_tables.layout import RELOC_BASE, U16

# Types whose RDATA holds no name (nothing compressed): answers written here directly.
_NAMELESS: Final = frozenset({QTYPE.A, QTYPE.AAAA, QTYPE.TXT})
_WIRE_U16: Final = struct.Struct("!H")  # a compression pointer or a length, as on the wire
_HEADER: Final = struct.Struct("!HHHHHH")
_QUESTION_TAIL: Final = struct.Struct("!HH")
_RECORD_HEAD: Final = struct.Struct("!HHIH")  # type, class, TTL, RDLENGTH


def plain_answer(found: Lookup) -> bytes | None:
    """The template of an answer of one RRset at the name asked whose RDATA holds no
    name — what most names of a big zone are — written without a dnslib pack (the same
    bytes: a property test compares them with the full path's)."""
    if (
        len(found.answer) != 1
        or found.authority
        or found.additional
        or found.negative
        or found.answer[0].owner is not None
        or not found.authoritative
        or found.rcode
    ):
        return None
    rrset = found.answer[0].rrset
    if rrset.rtype not in _NAMELESS:
        return None
    rest = bytearray()
    head = struct.pack("!HHHI", 0xC00C, rrset.rtype, 1, rrset.ttl)
    for rdata in rrset.rdatas:
        buffer = DNSBuffer()
        rdata.pack(buffer)
        rest += head + struct.pack("!H", len(buffer.data)) + buffer.data
    return struct.pack("!HHHHH", 0x8400, len(rrset.rdatas), 0, 0, 0) + bytes(rest)


class _NotingPointers(DNSBuffer):
    """dnslib's buffer, noting where its name compression writes each pointer. Its names
    are written by dnslib's own algorithm (the same suffix table, so the same bytes) in
    one loop without a struct call per label."""

    def __init__(self) -> None:
        super().__init__()
        self.pointers: list[int] = []

    def encode_name(self, given: object) -> None:
        name = given if isinstance(given, DNSLabel) else DNSLabel(given)
        labels, names, data = name.label, self.names, self.data
        if len(b".".join(labels)) > 253:  # dnslib's len(name)
            raise DNSLabelError(f"Domain label too long: {name!r}")
        for i in range(len(labels)):
            suffix = labels[i:]
            at = names.get(suffix)
            if at is not None:
                self.pointers.append(self.offset)
                data += _WIRE_U16.pack(0xC000 | at & 0x3FFF)
                self.offset += 2
                return
            names[suffix] = self.offset
            label = labels[i]
            if len(label) > 63:
                raise DNSLabelError(f"Label component too long: {label!r}")
            data.append(len(label))
            data += label
            self.offset += 1 + len(label)
        data.append(0)
        self.offset += 1


Composed = tuple[bytes, list[int]]


class _Header:
    __slots__ = ("aa", "rcode")

    def __init__(self) -> None:
        self.aa = self.rcode = 0


class _Question:
    __slots__ = ("qname",)

    def __init__(self, qname: DNSLabel) -> None:
        self.qname = qname


Record = tuple[DNSLabel, int, int, RD]  # owner, type, TTL, RDATA


def _record(rname: DNSLabel, rtype: int, ttl: int = 0, rdata: RD | None = None) -> Record:
    assert rdata is not None
    return rname, rtype, ttl, rdata


class _Reply:
    """What the full path's `fill` writes a reply into, without dnslib's DNSRecord, header
    and RR objects (their range-checked properties were a fifth of building a big zone's
    tables): the two header fields it sets and the three sections, packed below as
    dnslib packs them."""

    __slots__ = ("ar", "auth", "header", "q", "rr")

    def __init__(self, qname: DNSLabel) -> None:
        self.header = _Header()
        self.q = _Question(qname)
        self.rr: list[Record] = []
        self.auth: list[Record] = []
        self.ar: list[Record] = []

    def add_answer(self, *records: Record) -> None:
        self.rr.extend(records)

    def add_auth(self, *records: Record) -> None:
        self.auth.extend(records)

    def add_ar(self, *records: Record) -> None:
        self.ar.extend(records)


def compose(name: str, qtype: int, found: Lookup) -> Composed:
    """The full path's reply (lookup → fill → dnslib's pack) to a lower-case query for
    `name` without EDNS, and where its compression pointers are."""
    qname = to_label(name)
    reply = _Reply(qname)
    fill(reply, found, reply, None, _record)  # the fields fill uses, as a DNSRecord has them
    flags = 0x8000 | reply.header.aa << 10 | reply.header.rcode & 0xF  # QR, AA, RCODE
    buffer = _NotingPointers()
    buffer.append(_HEADER.pack(0, flags, 1, len(reply.rr), len(reply.auth), len(reply.ar)))
    buffer.encode_name(qname)
    buffer.append(_QUESTION_TAIL.pack(qtype, 1))
    data = buffer.data
    for section in (reply.rr, reply.auth, reply.ar):
        for rname, rtype, ttl, rdata in section:  # as dnslib's RR.pack writes a record
            buffer.encode_name(rname)
            buffer.append(_RECORD_HEAD.pack(rtype, 1, ttl, 0))
            start = buffer.offset
            rdata.pack(buffer)
            data[start - 2 : start] = _WIRE_U16.pack(buffer.offset - start)  # RDLENGTH
    return bytes(data), buffer.pointers


def template_of(composed: Composed) -> bytes | None:
    wire, pointers = composed
    if wire[4:6] != b"\x00\x01" or len(wire) > 4096:
        return None
    qend = 12
    while wire[qend]:
        qend += wire[qend] + 1
    qend += 5
    rest = bytearray(wire[qend:])
    relocs = []
    for at in pointers:
        if at < qend:
            return None  # the question's own name is written whole
        target = ((wire[at] << 8) | wire[at + 1]) & 0x3FFF
        if target != 12:  # the question's name stays at 12; the rest moves with its length
            rest[at - qend : at - qend + 2] = struct.pack(
                "!H", 0xC000 | (target - qend + RELOC_BASE)
            )
            relocs.append(at - qend)
    out = bytearray(wire[2:4] + wire[6:12])
    out += U16.pack(len(relocs))
    for at in relocs:
        out += U16.pack(at)
    return bytes(out + rest)


def lower_key(label: DNSLabel) -> str:
    return key_of_labels([part.lower() for part in label.label])


def key(name: str) -> bytes:
    """ "www.example.test." → its lower-case wire form."""
    parts = to_label(name).label
    return b"".join([bytes((len(p),)) + p.lower() for p in parts]) + b"\x00"


def soa_times(soa: SOA) -> bytes:
    """The SOA RDATA's serial and timers as on the wire."""
    return struct.pack("!IIIII", *soa.times)
