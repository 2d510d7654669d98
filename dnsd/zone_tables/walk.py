"""Zone answer tables, walked in Python: the same steps, in the same order, as
dnsd/_fastloop.c's `zone_reply` (the pure loop and TCP). Like the C walk it reads the
query's bytes as a mirror of dnsd.query_view for the shape it answers (an OPT without
options at most): a query with an EDNS option is the query view's."""

from __future__ import annotations

import struct

from dnsd.dnsname import NAME_BYTES
from dnsd.reply import EDNS_PAYLOAD, PLAIN_UDP_LIMIT
from dnsd.zone_tables.layout import (
    ALL_PYTHON,
    ENTRY,
    INLINE,
    NO_TEMPLATE,
    NODE,
    PYTHON_QTYPES,
    RELOC_BASE,
    U16,
    Tables,
)


def answer(tables: Tables, wire: bytes, transport: str) -> bytes | None:
    """The reply `wire` gets from the tables, or None (Python's full path answers): the
    same steps, in the same order, as dnsd/_fastloop.c's zone walk."""
    n = len(wire)
    if n < 17 or wire[2] & 0xF8 or wire[4:10] != b"\x00\x01\x00\x00\x00\x00" or wire[10]:
        return None
    arcount = wire[11]
    if arcount > 1:
        return None
    lowered = bytearray()
    starts = []
    pos = 12
    while True:
        if pos >= n:
            return None
        size = wire[pos]
        if size == 0:
            break
        if size > 63 or pos + 1 + size > n:
            return None
        starts.append(len(lowered))
        label = wire[pos + 1 : pos + 1 + size]
        if not NAME_BYTES.issuperset(label):
            return None
        lowered.append(size)
        lowered += label.lower()
        pos += 1 + size
    lowered.append(0)
    starts.append(len(lowered) - 1)
    if len(lowered) > 255:
        return None
    qend = pos + 5
    if qend > n:
        return None
    qtype, qclass = struct.unpack_from("!HH", wire, pos + 1)
    if qclass != 1 or qtype in PYTHON_QTYPES:
        return None
    opt = b""
    limit = 65535 if transport == "tcp" else PLAIN_UDP_LIMIT
    if arcount:
        if qend + 11 != n or wire[qend] or wire[qend + 1 : qend + 3] != b"\x00\x29":
            return None
        payload, _ext, version, flags, rdlen = struct.unpack_from("!HBBHH", wire, qend + 3)
        if version or rdlen:
            return None  # other versions, and options (ECS, cookies): Python
        if transport != "tcp":
            limit = min(max(PLAIN_UDP_LIMIT, payload), EDNS_PAYLOAD)
        opt = b"\x00\x00\x29" + struct.pack("!H", EDNS_PAYLOAD) + b"\x00\x00"
        opt += b"\x80\x00\x00\x00" if flags & 0x8000 else b"\x00\x00\x00\x00"
    elif qend != n:
        return None
    key = bytes(lowered)
    for at in starts:
        found = tables.nodes.get(key[at:] if at else key)
        if found is not None:
            return _walk(tables, found, at == 0, qtype, wire, qend, opt, limit)
    return None


def _walk(
    tables: Tables,
    node: bytes,
    exact: bool,
    qtype: int,
    wire: bytes,
    qend: int,
    opt: bytes,
    limit: int,
) -> bytes | None:
    fields = NODE.unpack_from(node)
    _, flags, n_exact, n_below, _, exact_default, below_default, templates_id = fields
    if flags & ALL_PYTHON:
        return None
    index = exact_default if exact else below_default
    first = NODE.size + (0 if exact else n_exact * ENTRY.size)
    where = 0
    for k in range(n_exact if exact else n_below):
        entry_type, where, entry_index = ENTRY.unpack_from(node, first + k * ENTRY.size)
        if entry_type == qtype:
            index = entry_index
            break
        where = 0
    if index == NO_TEMPLATE:
        return None
    if where & INLINE:
        template = node[index + 2 : index + 2 + U16.unpack_from(node, index)[0]]
    else:
        templates = tables.templates.get(templates_id)
        if templates is None or index >= len(templates):
            return None
        template = templates[index]
    n_relocs = U16.unpack_from(template, 8)[0]
    body = 10 + 2 * n_relocs
    rest = bytearray(template[body:])
    for k in range(n_relocs):
        at = U16.unpack_from(template, 10 + 2 * k)[0]
        stored = ((rest[at] << 8) | rest[at + 1]) & 0x3FFF
        rest[at : at + 2] = struct.pack("!H", 0xC000 | (stored - RELOC_BASE + qend))
    arcount = ((template[6] << 8) | template[7]) + (1 if opt else 0)
    reply = (
        wire[:2]
        + bytes([template[0] | (wire[2] & 0x01), template[1] | (wire[3] & 0x10)])
        + b"\x00\x01"
        + template[2:6]
        + struct.pack("!H", arcount)
        + wire[12:qend]
        + rest
        + opt
    )
    return reply if len(reply) <= limit else None
