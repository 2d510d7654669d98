"""Zone answer tables: templates, made by the full path's own composer (lookup →
reply.fill → dnslib's pack), and the wire form of names."""

from __future__ import annotations

import struct
from typing import Final

from dnslib import QTYPE, SOA, DNSBuffer, DNSHeader, DNSLabel, DNSQuestion, DNSRecord

from dnsd.dnsname import key_of_labels, to_label
from dnsd.reply import fill
from dnsd.zone_lookup import Lookup
from dnsd.zone_tables.layout import RELOC_BASE, U16

# Types whose RDATA holds no name (nothing compressed): answers written here directly.
_NAMELESS: Final = frozenset({QTYPE.A, QTYPE.AAAA, QTYPE.TXT})


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
    """dnslib's buffer, noting where its name compression wrote each pointer."""

    def __init__(self) -> None:
        super().__init__()
        self.pointers: list[int] = []

    def encode_name(self, name: object) -> None:
        start = self.offset
        super().encode_name(name)
        data, at = self.data, start
        while data[at] and data[at] < 0xC0:  # labels, then the root's zero or a pointer
            at += data[at] + 1
        if data[at]:
            self.pointers.append(at)


Composed = tuple[bytes, list[int]]


def compose(name: str, qtype: int, found: Lookup) -> Composed:
    """The full path's reply (lookup → fill → dnslib's pack) to a lower-case query for
    `name` without EDNS, and where its compression pointers are."""
    header = DNSHeader(id=0, qr=1, opcode=0, rd=0, cd=0, ra=0, aa=0)
    reply = DNSRecord(header, q=DNSQuestion(to_label(name), qtype, 1))
    fill(reply, found, reply, None)
    reply.set_header_qa()
    buffer = _NotingPointers()
    reply.header.pack(buffer)
    for section in (reply.questions, reply.rr, reply.auth, reply.ar):
        for item in section:
            item.pack(buffer)
    return bytes(buffer.data), buffer.pointers


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
    return b"".join(bytes([len(p)]) + p.lower() for p in to_label(name).label) + b"\x00"


def soa_times(soa: SOA) -> bytes:
    """The SOA RDATA's serial and timers as on the wire."""
    return struct.pack("!IIIII", *soa.times)
