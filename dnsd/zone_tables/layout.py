"""Zone answer tables: the layout both walks read (see the package's docstring)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from dnslib import QTYPE

from dnsd.tally import KNOWN_QTYPES
from dnsd.zone_tables.packed import PackedNodes

MAGIC: Final = b"dnsZ"
NODE = struct.Struct("<4sBBBBIII")
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
PYTHON_NODE: Final = NODE.pack(MAGIC, ALL_PYTHON, 0, 0, 0, NO_TEMPLATE, NO_TEMPLATE, 0)
COUNTED_QTYPES: Final = bytes(1 if QTYPE.get(t, None) in KNOWN_QTYPES else 0 for t in range(65536))


# Owner name (lower-case wire form) → node, packed (dnsd.zone_tables.packed).
Nodes = PackedNodes
# A zone's templates id (in each of its nodes) → its shared templates.
Templates = dict[int, list[bytes]]
# What dnsd/_fastloop.c's answer_hits takes: the nodes' records and slots, where it counts
# its answers (count key → answers), which question types the tally names (65,536 bytes,
# 1: named), and the templates the nodes name.
ForC = tuple[bytes, bytes, dict[bytes, int], bytes, Templates]


@dataclass(frozen=True, slots=True)
class ZoneNodes:
    """One zone's tables: its nodes, and the shared templates they name by `templates_id`.
    A zone served with another serial keeps the id and the nodes that do not hold the SOA,
    with templates of its own: each snapshot maps the id to the templates it serves."""

    nodes: Nodes
    templates_id: int
    templates: list[bytes]


@dataclass(frozen=True, slots=True)
class Tables:
    """The merged tables of one snapshot: what both loops walk."""

    nodes: Nodes
    templates: Templates
    counted_qtypes: bytes = COUNTED_QTYPES

    def for_c(self, counts: dict[bytes, int]) -> ForC:
        """What the compiled loop walks, counting its answers into `counts`."""
        nodes = self.nodes
        return nodes.records, nodes.slots, counts, self.counted_qtypes, self.templates
