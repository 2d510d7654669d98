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


def compose(name: str, qtype: int, found: Lookup) -> tuple[bytes, bytes]:
    """The full path's reply (lookup → fill → pack) to a lower-case query for `name`
    without EDNS, packed twice: as is, and one byte further into its buffer (every
    compression pointer then differs by one: that is how the template finds them)."""
    header = DNSHeader(id=0, qr=1, opcode=0, rd=0, cd=0, ra=0, aa=0)
    reply = DNSRecord(header, q=DNSQuestion(to_label(name), qtype, 1))
    fill(reply, found, reply, None)
    return _packed(reply, 0), _packed(reply, 1)


def _packed(reply: DNSRecord, shift: int) -> bytes:
    reply.set_header_qa()
    buffer = DNSBuffer()
    buffer.data, buffer.offset = bytearray(shift), shift
    reply.header.pack(buffer)
    for section in (reply.questions, reply.rr, reply.auth, reply.ar):
        for item in section:
            item.pack(buffer)
    return bytes(buffer.data[shift:])


def template_of(packed: tuple[bytes, bytes]) -> bytes | None:
    wire, shifted = packed
    if len(wire) != len(shifted) or wire[4:6] != b"\x00\x01" or len(wire) > 4096:
        return None
    qend = 12
    while wire[qend]:
        qend += wire[qend] + 1
    qend += 5
    rest = bytearray(wire[qend:])
    relocs = []
    i = qend
    while i < len(wire):
        if wire[i] == shifted[i] and (i + 1 >= len(wire) or wire[i + 1] == shifted[i + 1]):
            i += 1
            continue
        word, moved = (wire[i] << 8) | wire[i + 1], (shifted[i] << 8) | shifted[i + 1]
        if word & 0xC000 != 0xC000 or moved != word + 1:
            return None
        target = word & 0x3FFF
        if target != 12:  # the question's name stays at 12; the rest moves with its length
            rest[i - qend : i - qend + 2] = struct.pack("!H", 0xC000 | (target - qend + RELOC_BASE))
            relocs.append(i - qend)
        i += 2
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
