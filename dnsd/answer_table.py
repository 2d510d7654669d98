"""Answer tables: what the answer cache decided for one exact query, as flat bytes that
both serving loops walk (the pure one with `walk` below, the compiled one in
dnsd/_fastloop.c). Every decision is made here, once, when the table is built: which
entry each random draw leads to, which replies are finished, which counter each answer
bumps. Walking a table is mechanical: draw, compare against the cumulative weights
stored in it, follow the stored offset, copy the stored reply, bump the stored counters.

Layout (little-endian, offsets in bytes from the table's start, children always at a
higher offset than their parent, so every walk ends):

    header  HEADER  magic b"dnsT", version u16, address length u8 (0: any client, 4 or
                    16: only that source address), pad u8, serial u32 (the memo state it
                    was built from), root u32 (offset of the first node), address 16s
    LEAF    u8 kind 0, u8 flags (1: a finished reply), u16 pad, u32 leaf id, u32 reply
            offset, u32 reply length (the reply after its ID), i32 reply counter, i32
            load-balancer counter, i32 fallback counter (-1: none)
    DRAW    u8 kind 1, u8 pad, u16 pad, u32 n, f64 scale; n × f64 thresholds;
            (n + 1) × u32 child offsets — one rng.random() × scale; the first threshold
            above it picks the child (draws.branch_at; the last child: none above)
    SAMPLE  u8 kind 2, u8 pad, u16 take, u32 n, u32 m orders, u32 sample id; n × f64
            weights; m × (take × u16 item, u32 child offset) — `take` weighted draws
            without replacement (draws.draw_order); the order drawn picks the child
            among the m known

A walk ends in one of:

    HIT          a leaf with a finished reply (the value: the leaf's offset)
    NOT_CACHED   a leaf without one yet (the value: its leaf id → `Built.outcomes`)
    NEW_ORDER    a sample order not in the table (the value: the sample id →
                 `Built.samples`, and the order)
    OTHER_CLIENT the table was built for another source address (nothing drawn)

The compiled loop adds FALLBACK (a table it cannot read: counted, and the Python path
answers). The Python path turns NOT_CACHED and NEW_ORDER into the outcome the draws
reached, so no draw is ever made twice.
"""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from dnsd.steering.draws import Draw, Node, Outcome, Sample, branch_at, draw_order

MAGIC = b"dnsT"
VERSION = 1
HEADER = struct.Struct("<4sHBBII16s")
LEAF = struct.Struct("<BBHIIIiii")
DRAW = struct.Struct("<BBHId")
SAMPLE = struct.Struct("<BBHIII")
U32 = struct.Struct("<I")
_PREFIX = MAGIC + struct.pack("<H", VERSION)
_ROOT = struct.Struct("<12xI")  # the header's root offset
_LEAF_TAIL = struct.Struct("<IIiii")  # a leaf after its id: reply offset, length, counters
KIND_LEAF, KIND_DRAW, KIND_SAMPLE = 0, 1, 2
HAS_REPLY = 1
HIT, NOT_CACHED, NEW_ORDER, OTHER_CLIENT, FALLBACK = 0, 1, 2, 3, 4
MAX_SAMPLE_ITEMS = 1024  # the compiled walk's fixed buffers; a larger Sample gets no table
NO_COUNTER = -1

Walked = tuple[int, int, tuple[int, ...] | None]  # (code, value, order)


@dataclass(frozen=True, slots=True)
class Finished:
    """An outcome's finished reply (after the ID) and the counters an answer bumps."""

    reply: bytes
    reply_counter: int
    lb_counter: int = NO_COUNTER
    fallback_counter: int = NO_COUNTER


@dataclass(slots=True)
class Built:
    table: bytes
    outcomes: list[Outcome] = field(default_factory=list)  # leaf id → outcome
    samples: list[Sample] = field(default_factory=list)  # sample id → sample


class Unfit(ValueError):
    """A tree no table can hold (weights no walk could compare): the Python path serves."""


def static_table(reply: bytes, reply_counter: int) -> bytes:
    """A table of one leaf: the same reply for every client, no draws."""
    return build(Outcome((), None, None, False, 0, ()), {}, b"", 0, reply, reply_counter).table


def build(
    tree: Node,
    finished: Mapping[Outcome, Finished],
    address: bytes,
    serial: int,
    only_reply: bytes | None = None,
    only_counter: int = NO_COUNTER,
) -> Built:
    """The table of `tree` for the client at `address` (b"": any); `finished` holds the
    replies of the outcomes reached so far. `only_reply`: a static answer (tree is a leaf)."""
    writer = _Writer(finished, only_reply, only_counter)
    writer.out += HEADER.pack(MAGIC, VERSION, len(address), 0, serial, HEADER.size, address)
    writer.node(tree)
    writer.replies()
    return Built(bytes(writer.out), writer.outcomes, writer.samples)


class _Writer:
    def __init__(
        self, finished: Mapping[Outcome, Finished], only_reply: bytes | None, only_counter: int
    ) -> None:
        self.out = bytearray()
        self.finished = finished
        self.only = None if only_reply is None else Finished(only_reply, only_counter)
        self.outcomes: list[Outcome] = []
        self.leaf_ids: dict[int, int] = {}  # id(outcome) → leaf id
        self.samples: list[Sample] = []
        self.leaves: list[tuple[int, Finished]] = []  # (leaf offset, its reply) to place

    def node(self, node: Node) -> int:
        at = len(self.out)
        if node.__class__ is Draw:
            draw: Draw = node
            n = len(draw.thresholds)
            if len(draw.branches) != n + 1 or not _finite(draw.scale, *draw.thresholds):
                raise Unfit("a draw with other than one branch per threshold, plus one")
            self.out += DRAW.pack(KIND_DRAW, 0, 0, n, draw.scale)
            self.out += struct.pack(f"<{n}d", *draw.thresholds)
            children = len(self.out)
            self.out += bytes(4 * (n + 1))
            written: dict[int, int] = {}  # a branch repeated (the last, "none above"): once
            for i, branch in enumerate(draw.branches):
                if id(branch) not in written:
                    written[id(branch)] = self.node(branch)
                U32.pack_into(self.out, children + 4 * i, written[id(branch)])
        elif node.__class__ is Sample:
            sample: Sample = node
            n, take = len(sample.weights), sample.take
            if not 0 < take <= n <= MAX_SAMPLE_ITEMS or not _finite(*sample.weights):
                raise Unfit("a sample the compiled walk cannot draw")
            if any(w < 0 for w in sample.weights):
                raise Unfit("a negative weight")
            orders = [(k, o) for k, o in sample.leaves.items() if len(k) == take]
            self.out += SAMPLE.pack(KIND_SAMPLE, 0, take, n, len(orders), len(self.samples))
            self.samples.append(sample)
            self.out += struct.pack(f"<{n}d", *sample.weights)
            slots = []
            for order, _ in orders:
                self.out += struct.pack(f"<{take}H", *order)
                slots.append(len(self.out))
                self.out += bytes(4)
            for slot, (_, outcome) in zip(slots, orders, strict=True):
                U32.pack_into(self.out, slot, self.node(outcome))
        else:
            self.leaf(node)  # type: ignore[arg-type]
        return at

    def leaf(self, outcome: Outcome) -> None:
        leaf_id = self.leaf_ids.get(id(outcome))
        if leaf_id is None:
            leaf_id = self.leaf_ids[id(outcome)] = len(self.outcomes)
            self.outcomes.append(outcome)
        done = self.only or self.finished.get(outcome)
        if done is None:
            self.out += LEAF.pack(KIND_LEAF, 0, 0, leaf_id, 0, 0, -1, -1, -1)
            return
        self.leaves.append((len(self.out), done))
        self.out += LEAF.pack(
            KIND_LEAF,
            HAS_REPLY,
            0,
            leaf_id,
            0,
            len(done.reply),
            done.reply_counter,
            done.lb_counter,
            done.fallback_counter,
        )

    def replies(self) -> None:
        """The finished replies after the nodes, each once; their leaves point at them."""
        placed: dict[int, int] = {}
        for at, done in self.leaves:
            offset = placed.get(id(done))
            if offset is None:
                offset = placed[id(done)] = len(self.out)
                self.out += done.reply
            U32.pack_into(self.out, at + 8, offset)


def _finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


def walk(table: bytes, address: bytes, rng: random.Random) -> Walked:
    """Where the next draws of `rng` lead in `table` for a client at `address` (packed)."""
    if table[:6] != _PREFIX:
        raise ValueError("not an answer table of this version")
    address_len = table[6]
    if address_len and address != table[16 : 16 + address_len]:
        return OTHER_CLIENT, 0, None
    at = _ROOT.unpack_from(table)[0]
    while True:
        kind = table[at]
        if kind == KIND_LEAF:
            if table[at + 1] & HAS_REPLY:
                return HIT, at, None
            return NOT_CACHED, U32.unpack_from(table, at + 4)[0], None
        if kind == KIND_DRAW:
            _, _, _, n, scale = DRAW.unpack_from(table, at)
            start = at + DRAW.size
            thresholds = _doubles(n).unpack_from(table, start)
            i = branch_at(thresholds, scale, rng.random())
            at = U32.unpack_from(table, start + 8 * n + 4 * i)[0]
        elif kind == KIND_SAMPLE:
            _, _, take, n, m, sample_id = SAMPLE.unpack_from(table, at)
            start = at + SAMPLE.size
            weights = _doubles(n).unpack_from(table, start)
            order = draw_order(weights, take, rng)
            entry, size = start + 8 * n, 2 * take + 4
            packed = struct.pack(f"<{take}H", *order)
            for _ in range(m):
                if table[entry : entry + 2 * take] == packed:
                    at = U32.unpack_from(table, entry + 2 * take)[0]
                    break
                entry += size
            else:
                return NEW_ORDER, sample_id, order
        else:
            raise ValueError(f"an answer table node of unknown kind {kind}")


_DOUBLES: dict[int, struct.Struct] = {}


def _doubles(n: int) -> struct.Struct:
    found = _DOUBLES.get(n)
    if found is None:
        found = _DOUBLES[n] = struct.Struct(f"<{n}d")
    return found


def leaf_at(table: bytes, at: int) -> tuple[bytes, int, int, int]:
    """A HIT's leaf: (reply after the ID, reply counter, lb counter, fallback counter)."""
    offset, length, reply_counter, lb, fallback = _LEAF_TAIL.unpack_from(table, at + 8)
    return table[offset : offset + length], reply_counter, lb, fallback
