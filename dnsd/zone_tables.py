"""Zone answer tables: every answer the zone data decides by itself, finished when a zone
loads, keyed by owner name — so both serving loops answer any question about an ordinary
name, one that does not exist too, without the full path (dnsd/_fastloop.c walks these
tables in C, `answer` below in Python; a property test holds both to `resolve`'s bytes).

The tables map each owner name (lower-case wire form) of every unsigned zone — empty
non-terminals included — to `(node, templates)`. A walk looks up the query name, then its
parents, one label at a time: the first name found is the node itself (an *exact* answer)
or the closest encloser (a *below* answer: NXDOMAIN, a referral, wildcard synthesis).
Either side maps question types to templates, with a default for every other type; a
template index NO_TEMPLATE means: Python answers (a load-balanced name, a CNAME to one, a
DNAME's synthesis, anything a template cannot express). Every template was made by the
full path's own composer (`zone_lookup` + `reply.fill` + dnslib's pack) for a lower-case
query without EDNS; a walk copies the question from the query, writes in the ID, RD and CD,
appends the OPT record for an EDNS query, moves the compression pointers by the question's
length, and gives up (Python answers) when the reply would not fit the client's limit.
Signed zones are left to Python (their answers carry signatures): their apex is a node that
says so. Names below a zone that another served zone holds belong to that one.

Layout (little-endian):

    node      magic b"dnsZ", u8 flags (1: Python answers everything below and at it),
              u8 n_exact, u8 n_below, u8 pad, u32 exact default, u32 below default,
              n_exact × ENTRY, n_below × ENTRY
    ENTRY     u16 qtype, u16 flags (INLINE: the template is in the node, at the offset
              given, after its u16 length), u32 template index (NO_TEMPLATE: Python)
    template  the reply's flags (RD, CD clear), ANCOUNT, NSCOUNT, ARCOUNT (no OPT) as in
              the wire (big-endian), u16 n_relocs (little-endian), n_relocs × u16 offsets
              into the rest, then the rest: the reply after its question. A pointer at a
              reloc offset holds RELOC_BASE + (target − end of the question); other
              pointers point at the question's name (offset 12), whatever its length.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Final

from dnslib import QTYPE, SOA, DNSBuffer, DNSHeader, DNSLabel, DNSQuestion, DNSRecord

from dnsd.dnsname import is_below_or_at, key_of_labels, labels, parent, to_label
from dnsd.rdata import target
from dnsd.reply import EDNS_PAYLOAD, PLAIN_UDP_LIMIT, fill
from dnsd.snapshot import SERIAL_CHANGED, CompiledZone, Snapshot
from dnsd.tally import KNOWN_QTYPES
from dnsd.zone_lookup import Lookup, lookup_in

log = logging.getLogger("dnsd.zone_tables")

MAGIC: Final = b"dnsZ"
NODE = struct.Struct("<4sBBBBII")
ENTRY = struct.Struct("<HHI")
U16 = struct.Struct("<H")
NO_TEMPLATE: Final = 0xFFFFFFFF
ALL_PYTHON: Final = 1
INLINE: Final = 1  # an entry's template is in the node itself, at this offset
RELOC_BASE: Final = 512  # > the longest question (4 + 255 + 4 + 12 bytes before it)
PROBE: Final = 65280  # a private type (RFC 6895): what any type without its own entry gets
# Types a walk never answers (Python does): meta and question-only types, OPT, NXNAME.
PYTHON_QTYPES: Final = frozenset({0, 41, *range(128, 256)})
# The probes below a closest encloser: two labels no zone holds (checked), of other lengths
# and bytes, so an answer that echoes the name or depends on its length shows.
PROBE_LABELS: Final = (b"dnsd-probe-q", b"dnsd-probe-zx")
# Count keys (dnsd.tally): a question type the tally does not name counts as OTHER (0xFFFF).
PYTHON_NODE: Final = NODE.pack(MAGIC, ALL_PYTHON, 0, 0, 0, NO_TEMPLATE, NO_TEMPLATE)
COUNTED_QTYPES: Final = bytes(
    1 if QTYPE.get(t, None) in KNOWN_QTYPES else 0 for t in range(65536)
)  # fmt: skip


Nodes = dict[bytes, tuple[bytes, list[bytes]]]
# What dnsd/_fastloop.c's answer_hits takes: the nodes, where it counts its answers (count
# key → answers) and which question types the tally names (65,536 bytes, 1: named).
ForC = tuple[Nodes, dict[bytes, int], bytes]


@dataclass(frozen=True, slots=True)
class Tables:
    """The merged tables of one snapshot: what both loops walk."""

    nodes: Nodes
    counted_qtypes: bytes = COUNTED_QTYPES


class _Build:
    """A snapshot's tables, built in a thread of their own (work that grows with the
    config never runs on a serving loop); `tables` is None until they are done."""

    def __init__(self, snap: Snapshot, start: bool) -> None:
        self.tables: Tables | None = None
        self._snap = snap
        if start:
            threading.Thread(target=self._run, name="dnsd zone tables", daemon=True).start()
        else:
            self._run()

    def _run(self) -> None:
        try:
            self.tables = merged(self._snap)
        except Exception:  # a bug here costs speed, never answers: Python answers all
            log.exception("zone answer tables not built: the full path answers every query")
        self._snap = None  # type: ignore[assignment]  # not kept alive by its own build


# A snapshot with at most this many names (a few milliseconds of work) gets its tables at
# once wherever it is first asked for them; a bigger one in a thread of their own. Snapshots
# that loading makes (dnsd.loading) have theirs before they serve.
SYNC_NAMES: Final = 500


def ready(snap: Snapshot, background: bool | None = None) -> Tables | None:
    """The snapshot's tables, or None while they are being built (the first call starts
    the build; `background` False: built now, in this thread; None: by size)."""
    if background is None:
        background = sum(len(zone.nodes) for zone in snap.zones.values()) > SYNC_NAMES
    return snap.derived.get("zone tables", lambda: _Build(snap, background)).tables


def merged(snap: Snapshot) -> Tables:
    """Every zone's tables in one mapping; a name below a more specific served zone is
    left to that zone's tables."""
    nodes: Nodes = {}
    apexes = sorted(snap.zones, key=lambda name: name.count("."))
    for name in apexes:  # parents first: a child zone's names replace theirs
        zone = snap.zones[name]
        signed = name in snap.signing
        built = zone.derived.get(
            f"answer tables signed={signed}", partial(zone_tables, zone, signed)
        )
        children = [c for c in apexes if c != name and is_below_or_at(c, name)]
        if children:
            keep = {_key(c) for c in children}
            for key, value in built.items():
                if not any(key.endswith(k) and _at_label(key, k) for k in keep):
                    nodes[key] = value
        else:
            nodes.update(built)
    return Tables(nodes)


def _at_label(key: bytes, suffix: bytes) -> bool:
    """Whether wire name `key` ending in `suffix` ends there at a label boundary."""
    cut = len(key) - len(suffix)
    pos = 0
    while pos < cut:
        pos += key[pos] + 1
    return pos == cut


def zone_tables(zone: CompiledZone, signed: bool) -> Nodes:
    """One zone's tables (see the module's docstring): those of the zone it replaces with
    the new SOA written in, when only the serial changed (dnsd.snapshot.with_serials)."""
    changed = zone.derived.take(SERIAL_CHANGED)
    if signed:
        return {_key(zone.name): (PYTHON_NODE, [])}
    if changed is not None:
        built, old_soa, new_soa = changed
        before = built.get(f"answer tables signed={signed}")
        if before is not None:
            return _with_soa(before, _soa_times(old_soa), _soa_times(new_soa))
    try:
        return _ZoneBuilder(zone).tables()
    except SharingError:
        log.exception("zone answer tables: every name of the zone built on its own")
        return _ZoneBuilder(zone, check_every=1).tables()


def _soa_times(soa: SOA) -> bytes:
    return struct.pack("!IIIII", *soa.times)


def _with_soa(before: Nodes, old: bytes, new: bytes) -> Nodes:
    """A zone's tables with another SOA serial: every template holding the SOA (negative
    answers, the SOA itself, a chain to it) has the new serial written in."""
    if old == new:
        return before
    templates: list[bytes] = []
    shared: list[bytes] | None = None
    out: Nodes = {}
    for key, (node, zone_templates) in before.items():
        if shared is None:
            shared = zone_templates
            templates.extend(t.replace(old, new) if old in t else t for t in zone_templates)
        assert zone_templates is shared  # one list per zone (_ZoneBuilder.tables)
        out[key] = (node.replace(old, new) if old in node else node, templates)
    return out


class SharingError(RuntimeError):
    """A plain name's negative answer differs from the others' (a bug: it should not)."""


class _ZoneBuilder:
    """One zone's nodes. Most names are *plain* — no delegation at or above them, no
    wildcard or DNAME, not a name the zone's SOA names — and every plain name shares one
    NODATA template (other types) and one NXDOMAIN template (names below it): made once,
    checked again on a sample of names, and made per name everywhere else."""

    def __init__(self, zone: CompiledZone, check_every: int = 997) -> None:
        self.zone = zone
        self.check_every = check_every
        self.templates: list[bytes] = []
        self._index: dict[bytes, int] = {}
        soa = zone.soa.rdata
        # The names just below the apex that the SOA's names are at or under.
        self._soa_tops = {self._top(_lower_key(soa.mname)), self._top(_lower_key(soa.rname))}
        self._shared: tuple[int, int] | None = None  # (NODATA, NXDOMAIN) of plain names
        self._plain_seen = 0
        self.python_names: set[str] = set()  # names that are no nodes: Python answers them

    def tables(self) -> Nodes:
        nodes = {_key(name): (self.node(name), self.templates) for name in self.zone.nodes}
        for name in self.python_names:
            nodes[_key(name)] = (PYTHON_NODE, self.templates)
        return nodes

    def node(self, name: str) -> bytes:
        exact_types, below_types = self._types(name)
        # The name's own answers go into its node (one object fewer to reach per query).
        inline = {qtype: self._exact_template(name, qtype) for qtype in exact_types}
        below: dict[int, int] = {}
        if QTYPE.CNAME in self.zone.nodes[name].rrsets:
            exact_default, below_default = (
                NO_TEMPLATE,
                self._below_default(name, below_types, below),
            )
        elif self._plain(name):
            exact_default, below_default = self._plain_defaults(name)
        else:
            exact_default = self._exact(name, PROBE)
            below_default = self._below_default(name, below_types, below)
        out = bytearray(
            NODE.pack(MAGIC, 0, len(inline), len(below), 0, exact_default, below_default)
        )
        at = len(out) + ENTRY.size * (len(inline) + len(below))
        placed = bytearray()
        for qtype in sorted(inline):
            template = inline[qtype]
            if template is None:
                out += ENTRY.pack(qtype, 0, NO_TEMPLATE)
                continue
            out += ENTRY.pack(qtype, INLINE, at + len(placed))
            placed += U16.pack(len(template)) + template
        for qtype in sorted(below):
            out += ENTRY.pack(qtype, 0, below[qtype])
        return bytes(out + placed)

    def _below_default(self, name: str, below_types: set[int], below: dict[int, int]) -> int:
        probes = [p for label in PROBE_LABELS if (p := _probe_name(self.zone, name, label))]
        if len(probes) != len(PROBE_LABELS):
            return NO_TEMPLATE
        below.update({qtype: self._below(name, probes, qtype) for qtype in below_types})
        return self._below(name, probes, PROBE)

    def _plain(self, name: str) -> bool:
        zone = self.zone
        if zone.nodes[name].lb is not None or ("*." + name if name != "." else "*.") in zone.nodes:
            return False
        if name == zone.name or self._top(name) in self._soa_tops:
            return False  # the SOA's names would be compressed against this one's parents
        if zone.cuts or zone.dnames:
            at = name
            while at != zone.name:
                if at in zone.cuts or at in zone.dnames:
                    return False
                at = parent(at)
            if zone.name in zone.dnames:
                return False
        return True

    def _top(self, name: str) -> str | None:
        """The ancestor-or-self of `name` just below the apex (None: not below it)."""
        if name == self.zone.name or not is_below_or_at(name, self.zone.name):
            return None
        parts = labels(name)
        return ".".join(parts[len(parts) - self.zone.label_count - 1 :]) + "."

    def _plain_defaults(self, name: str) -> tuple[int, int]:
        """The shared (NODATA, NXDOMAIN) templates of plain names."""
        self._plain_seen += 1
        if self._shared is not None and self._plain_seen % self.check_every:
            return self._shared
        made = (self._exact(name, PROBE), self._below_default(name, set(), {}))
        if self._shared is None:
            self._shared = made
        elif made != self._shared:
            raise SharingError(f"{self.zone.name}: {name} answers otherwise than other names")
        return made

    def _node_types(self, name: str) -> set[int]:
        node = self.zone.nodes.get(name)
        return set(node.rrsets) if node is not None else set()

    def _types(self, name: str) -> tuple[set[int], set[int]]:
        """The types that get entries of their own, at the name and below it (the default
        covers the rest: what lookup answers for PROBE it answers for them)."""
        node = self.zone.nodes[name]
        exact = set(node.rrsets)
        if name in self.zone.cuts:  # DS at a delegation: the parent's answer, not a referral
            exact.add(QTYPE.DS)
        if node.lb is not None:
            exact |= {QTYPE.A, QTYPE.AAAA}
        if QTYPE.CNAME in node.rrsets:  # a chain: the types at its end (others: Python)
            exact |= {QTYPE.A, QTYPE.AAAA, *self._chain_end_types(name)}
        wildcard = self.zone.nodes.get("*." + name if name != "." else "*.")
        below: set[int] = set()
        if wildcard is not None:
            below = set(wildcard.rrsets) | {QTYPE.A, QTYPE.AAAA, QTYPE.DS}
            if QTYPE.CNAME in wildcard.rrsets:
                below |= self._chain_end_types("*." + name)
        return {t for t in exact if t not in PYTHON_QTYPES}, {
            t for t in below if t not in PYTHON_QTYPES
        }

    def _chain_end_types(self, name: str) -> set[int]:
        seen, types = {name}, set()
        node = self.zone.nodes.get(name)
        while node is not None and QTYPE.CNAME in node.rrsets:
            name = target(QTYPE.CNAME, node.rrsets[QTYPE.CNAME].rdatas[0]) or ""
            if name in seen:
                break
            seen.add(name)
            node = self.zone.nodes.get(name)
            if node is not None:
                types |= set(node.rrsets)
        return types

    def _exact(self, name: str, qtype: int) -> int:
        return self._intern(self._exact_template(name, qtype))

    def _exact_template(self, name: str, qtype: int) -> bytes | None:
        found = lookup_in(self.zone, name, qtype)
        if found.lb is not None:
            return None
        return _plain_answer(found) or _template(_compose(name, qtype, found))

    def _below(self, encloser: str, probes: list[str], qtype: int) -> int:
        made = []
        for probe in probes:
            found = lookup_in(self.zone, probe, qtype)
            if found.lb is not None:
                return NO_TEMPLATE
            self._leave_to_python(encloser, probe, found)
            made.append(_template(_compose(probe, qtype, found)))
        if made[0] is None or any(t != made[0] for t in made):
            return NO_TEMPLATE  # the answer depends on the name asked (a DNAME's synthesis)
        return self._intern(made[0])

    def _leave_to_python(self, encloser: str, probe: str, found: Lookup) -> None:
        """A name in the answer below the encloser where no node is (the SOA's rname
        `hostmaster.example.` is one) would be compressed against a query for it or a
        name below it, which a template cannot say: such names (and their parents up to
        the encloser) get nodes that leave them to Python; every other name below the
        encloser takes the template."""
        for name in _names(found):
            if name in (probe, encloser) or not is_below_or_at(name, encloser):
                continue
            while name != encloser and name not in self.zone.nodes:
                self.python_names.add(name)
                name = parent(name)

    def _intern(self, template: bytes | None) -> int:
        if template is None:
            return NO_TEMPLATE
        index = self._index.get(template)
        if index is None:
            index = self._index[template] = len(self.templates)
            self.templates.append(template)
        return index


def _names(found: Lookup) -> Iterable[str]:
    """Every owner and target name an answer holds."""
    for part in found.answer:
        if part.owner is not None:
            yield part.owner
        for rdata in part.rrset.rdatas:
            name = target(part.rrset.rtype, rdata)
            if name:
                yield name
    for rrset in [*found.authority, *found.additional]:
        yield rrset.owner
        for rdata in rrset.rdatas:
            name = target(rrset.rtype, rdata)
            if name:
                yield name
    if found.negative and found.zone is not None:
        soa = found.zone.soa.rdata
        yield from (str(soa.mname).lower(), str(soa.rname).lower())


def _probe_name(zone: CompiledZone, encloser: str, label: bytes) -> str | None:
    name = label.decode() + "." + (encloser if encloser != "." else "")
    return None if name in zone.nodes else name


# Types whose RDATA holds no name (nothing compressed): answers written here directly.
_NAMELESS: Final = frozenset({QTYPE.A, QTYPE.AAAA, QTYPE.TXT})


def _plain_answer(found: Lookup) -> bytes | None:
    """The template of an answer of one RRset at the name asked whose RDATA holds no
    name — what most names of a big zone are — written without a dnslib pack (the same
    bytes: a property test compares them with the full path's)."""
    if (
        len(found.answer) != 1 or found.authority or found.additional or found.negative
        or found.answer[0].owner is not None or not found.authoritative or found.rcode
    ):  # fmt: skip
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


def _compose(name: str, qtype: int, found: Lookup) -> tuple[bytes, bytes]:
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


def _template(packed: tuple[bytes, bytes]) -> bytes | None:
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


def _lower_key(label: DNSLabel) -> str:
    return key_of_labels([part.lower() for part in label.label])


def _key(name: str) -> bytes:
    """ "www.example.test." → its lower-case wire form."""
    return b"".join(bytes([len(p)]) + p.lower() for p in to_label(name).label) + b"\x00"


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
        if not _NAME_BYTES.issuperset(label):
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
            return _walk(found, at == 0, qtype, wire, qend, opt, limit)
    return None


_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_*")


def _walk(
    found: tuple[bytes, list[bytes]], exact: bool, qtype: int, wire: bytes, qend: int,
    opt: bytes, limit: int,
) -> bytes | None:  # fmt: skip
    node, templates = found
    _, flags, n_exact, n_below, _, exact_default, below_default = NODE.unpack_from(node)
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
        + b"\x00\x01" + template[2:6] + struct.pack("!H", arcount)
        + wire[12:qend] + rest + opt
    )  # fmt: skip
    return reply if len(reply) <= limit else None
