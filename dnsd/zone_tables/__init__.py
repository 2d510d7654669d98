"""Zone answer tables: every answer the zone data decides by itself, finished when a zone
loads, keyed by owner name — so both serving loops answer any question about an ordinary
name, one that does not exist too, without the full path (dnsd/_fastloop.c walks these
tables in C, `answer` below in Python; a property test holds both to `resolve`'s bytes).

The tables map each owner name (lower-case wire form) of every unsigned zone — empty
non-terminals included — to its node (packed in two buffers: dnsd.zone_tables.packed), and
each zone's templates id to the templates its nodes share (one map per snapshot: a zone
served with a new serial keeps its nodes' slots). A
walk looks up the query name, then its parents, one label at a time: the first name found
is the node itself (an *exact* answer) or the closest encloser (a *below* answer:
NXDOMAIN, a referral, wildcard synthesis).
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
              u32 templates id (its zone's shared templates), n_exact × ENTRY,
              n_below × ENTRY
    ENTRY     u16 qtype, u16 flags (INLINE: the template is in the node, at the offset
              given, after its u16 length), u32 template index (NO_TEMPLATE: Python)
    template  the reply's flags (RD, CD clear), ANCOUNT, NSCOUNT, ARCOUNT (no OPT) as in
              the wire (big-endian), u16 n_relocs (little-endian), n_relocs × u16 offsets
              into the rest, then the rest: the reply after its question. A pointer at a
              reloc offset holds RELOC_BASE + (target − end of the question); other
              pointers point at the question's name (offset 12), whatever its length.
"""

from dnsd.zone_tables.build import ready
from dnsd.zone_tables.layout import COUNTED_QTYPES, ForC, Nodes, Tables, ZoneNodes
from dnsd.zone_tables.walk import answer

__all__ = ["COUNTED_QTYPES", "ForC", "Nodes", "Tables", "ZoneNodes", "answer", "ready"]
