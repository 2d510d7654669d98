"""Class answer tables: a load-balanced name's first answer from its class's compiled plan.

Load balancers configured alike but for their name form a *class* (dnsd.xfr.lb_answers):
for the same client they decide alike. When the answer cache has compiled one member's
plan into an answer table with a single outcome (no draws, no expiry: docs/development.md
says which), it also publishes that table under the *class key* — the class's tag, then
the query's bytes after the ID without its question name — with each reply stored without
its question. A query for another member of the class, asked for the first time, finds it:
both serving loops (`answer` here, `class_answer` in dnsd/_fastloop.c: the same steps)
copy the question from the query in between, so no Python runs per name. Only replies
whose records all point at the question's name (0xC00C) and carry no name in their data
(A and AAAA answers, an OPT record last) are shared: they are the same bytes for every
member but the question. Answers are counted per member name and counters of the member
that built the table (`counts`: lower-case name + those counters → answers), and folded
into the member's own load balancer when the metrics read them.
"""

from __future__ import annotations

import logging
import random
import struct
import threading
from collections.abc import Mapping
from typing import Any, Final

from dnsd import answer_table
from dnsd.answer_table import HIT, Finished
from dnsd.dnsname import NAME_BYTES
from dnsd.health.view import HealthView
from dnsd.reply import EDNS_PAYLOAD, PLAIN_UDP_LIMIT, Client
from dnsd.snapshot import Snapshot
from dnsd.steering.draws import Outcome
from dnsd.steering.plan import lasting
from dnsd.xfr.lb_answers import lb_index
from dnsd.zone_tables.templates import key as wire_key

log = logging.getLogger("dnsd.lb_classes")
SYNC_NAMES: Final = 500  # at most this many names: made at once (a few milliseconds)
TAG = struct.Struct("<I")
COUNTED = struct.Struct("<ii")  # after the name in a count key: lb counter, fallback counter
_RR_HEAD = struct.Struct("!HHHIH")  # pointer, type, class, TTL, RDLENGTH
_SHAREABLE_TYPES: Final = frozenset({1, 28})  # A, AAAA: no name in their data
OPT_TYPE: Final = 41


class Members:
    """Per snapshot: each load-balanced owner name (lower-case wire form) an ordinary
    query reaches, → its class's tag (`names`, what both loops read) and its load
    balancer (`lbs`)."""

    __slots__ = ("lbs", "names")

    def __init__(self, names: dict[bytes, bytes], lbs: dict[bytes, str]) -> None:
        self.names, self.lbs = names, lbs  # never changed once made


NONE = Members({}, {})


class _Build:
    """A snapshot's members, made in a thread of their own when the snapshot is big (the
    classes of 10,000 load balancers take about a second): None until then."""

    def __init__(self, snap: Snapshot, background: bool | None) -> None:
        self.members: Members | None = None
        if background is None:
            background = sum(len(zone.nodes) for zone in snap.zones.values()) > SYNC_NAMES
        if not background:
            self._run(snap)
        else:
            threading.Thread(
                target=self._run, args=(snap,), name="dnsd lb classes", daemon=True
            ).start()

    def _run(self, snap: Snapshot) -> None:
        try:
            self.members = _members(snap)
        except Exception:  # a bug here costs speed, never answers: Python answers all
            log.exception("load-balancer class tables not built: each name answered on its own")
            self.members = NONE


def prepare(snap: Snapshot) -> None:
    """Make the snapshot's members now, in this thread (loading: served from the first
    query)."""
    snap.derived.get("lb classes", lambda: _Build(snap, False))


def members(snap: Snapshot, health: HealthView) -> Members | None:
    """The snapshot's members (made once per snapshot; None while being made), but for the
    load balancers with a state of their own in `health` — a trickle override or ramp, a
    ramp of their regions: they decide otherwise than their class (a new states generation
    asks again)."""
    made = snap.derived.get("lb classes", lambda: _Build(snap, None)).members
    if made is None:
        return None
    own = {*health.trickle_overrides, *health.trickle_ramps, *(lb for lb, _ in health.ramps)}
    if not own:
        return made
    kept = [key for key, lb in made.lbs.items() if lb not in own]
    return Members({key: made.names[key] for key in kept}, {key: made.lbs[key] for key in kept})


def _members(snap: Snapshot) -> Members:
    classes = lb_index(snap.config).classes
    apexes = set(snap.zones)
    names: dict[bytes, bytes] = {}
    lbs: dict[bytes, str] = {}
    for apex, zone in snap.zones.items():
        if apex in snap.signing:  # signed answers carry signatures: Python's
            continue
        for name, node in zone.nodes.items():
            if node.lb is None or node.lb.name not in classes or "*" in name:
                continue
            if _shadowed(name, apex, apexes, zone.cuts, zone.dnames):
                continue
            key = _wire(name)
            names[key] = TAG.pack(classes[node.lb.name])
            lbs[key] = node.lb.name
    return Members(names, lbs)


def _wire(name: str) -> bytes:
    """ "www.example.test." → its lower-case wire form (names with escapes: dnslib's)."""
    if "\\" in name or not name.isascii():
        return wire_key(name)
    if name == ".":
        return b"\x00"
    return b"".join(bytes([len(label)]) + label for label in name.lower().encode().split(b"."))


def _shadowed(
    name: str, apex: str, apexes: set[str], cuts: frozenset[str], dnames: Mapping[str, str]
) -> bool:
    """Whether a query for `name` is answered otherwise than by its own node: a zone cut or
    a DNAME at or above it, or a more specific served zone."""
    at = name
    while at != apex:
        if at in cuts or at in dnames or at in apexes:
            return True
        at = at.split(".", 1)[1] or "."
    return apex in dnames


def class_key(wire: bytes, names: Mapping[bytes, bytes]) -> tuple[bytes, bytes, int] | None:
    """(the class key, the lower-case name, the question's end) of a query for a member
    name, else None: the same steps as dnsd/_fastloop.c's `class_key`."""
    n = len(wire)
    if n < 17 or wire[2] & 0xF8 or wire[4:10] != b"\x00\x01\x00\x00\x00\x00" or wire[10]:
        return None
    pos = 12
    while True:
        if pos >= n:
            return None
        size = wire[pos]
        if size == 0:
            break
        if (
            size > 63
            or pos + 1 + size > n
            or not NAME_BYTES.issuperset(wire[pos + 1 : pos + 1 + size])
        ):
            return None
        pos += 1 + size
    qend = pos + 5
    if qend > n or qend - 12 > 255 + 4:
        return None
    lowered = bytes(wire[12 : pos + 1]).lower()
    tag = names.get(lowered)
    if tag is None:
        return None
    return tag + bytes(wire[2:12]) + bytes(wire[pos + 1 :]), lowered, qend


def limit_of(wire: bytes, qend: int, transport: str) -> int:
    """The largest reply this query may get (its OPT's payload size, clamped)."""
    if transport == "tcp":
        return 65535
    if wire[11] and len(wire) >= qend + 11:
        payload = (wire[qend + 3] << 8) | wire[qend + 4]
        return min(max(PLAIN_UDP_LIMIT, payload), EDNS_PAYLOAD)
    return PLAIN_UDP_LIMIT


def answer(
    tables: Mapping[bytes, bytes],
    counts: dict[bytes, int],
    names: Mapping[bytes, bytes],
    wire: bytes,
    address: bytes,
    transport: str,
    rng: random.Random,
) -> bytes | None:
    """The reply a member name's query gets from its class's table, counted; None: no
    table (or another client's, or too large): the query goes on as before."""
    found = class_key(wire, names)
    if found is None:
        return None
    key, lowered, qend = found
    table = tables.get(key)
    if table is None:
        return None
    code, at, _ = answer_table.walk(table, address, rng)
    if code != HIT:
        return None
    stored, _, lb, fallback = answer_table.leaf_at(table, at)  # the reply: the caller's tally
    reply = wire[:2] + stored[:10] + wire[12:qend] + stored[10:]
    if len(reply) > limit_of(wire, qend, transport):
        return None
    if lb >= 0 or fallback >= 0:
        counted = lowered + COUNTED.pack(lb, fallback)
        counts[counted] = counts.get(counted, 0) + 1
    return reply


def shareable(reply: bytes) -> bytes | None:
    """A finished reply (after its ID) without its question, when every record in it is
    the same for any name asked (see the module's docstring); else None."""
    if len(reply) < 10 or reply[2:4] != b"\x00\x01":
        return None
    ancount, nscount, arcount = struct.unpack_from("!HHH", reply, 4)
    if nscount or arcount > 1:
        return None
    pos = 10
    while pos < len(reply) and reply[pos]:
        pos += reply[pos] + 1
    qend = pos + 5
    pos = qend
    for _ in range(ancount):
        if pos + _RR_HEAD.size > len(reply):
            return None
        pointer, rtype, _, _, rdlen = _RR_HEAD.unpack_from(reply, pos)
        if pointer != 0xC00C or rtype not in _SHAREABLE_TYPES:
            return None
        pos += _RR_HEAD.size + rdlen
    if arcount:  # the OPT record: the root name, then no name in its options
        if pos + 11 > len(reply) or reply[pos] or reply[pos + 1 : pos + 3] != b"\x00\x29":
            return None
        pos += 11 + ((reply[pos + 9] << 8) | reply[pos + 10])
    if pos != len(reply):
        return None
    return reply[:10] + reply[qend:]


def counted(
    counts: Mapping[bytes, int], lbs: Mapping[bytes, str], keys: list[tuple[str, Any]], kind: str
) -> dict[Any, int]:
    """The class tables' answers of one kind ("lb", "fallback"), each under its member's
    own load balancer: (lb, pool, region) and lb as the cache counts them."""
    out: dict[Any, int] = {}
    for key, n in counts.items():
        name = key[: -COUNTED.size]
        lb, fallback = COUNTED.unpack_from(key, len(name))
        member = lbs.get(name)
        index = lb if kind == "lb" else fallback
        if member is None or not 0 <= index < len(keys):
            continue
        value = keys[index][1]
        mine = (member, *value[1:]) if kind == "lb" else member
        out[mine] = out.get(mine, 0) + n
    return out


class ClassTables:
    """One answer cache's class tables (per transport: class key → table), the snapshot's
    members and the answers counted per member name and counters."""

    def __init__(self) -> None:
        self.members = NONE
        self._pending: tuple[Snapshot, HealthView] | None = None
        self.tables: dict[str, dict[bytes, bytes]] = {"udp": {}, "tcp": {}}
        self.counts: dict[bytes, int] = {}
        self.answered = 0  # by the Python walk (the compiled loop's: in `counts`)

    def refresh(self, snap: Snapshot, health: HealthView) -> None:
        """A new snapshot or new states: the members they make (none until made)."""
        self.members, self._pending = NONE, (snap, health)
        self.poll()

    def poll(self) -> None:
        """Take the members once made (every batch: one test while none is pending)."""
        if self._pending is not None:
            made = members(*self._pending)
            if made is not None:
                self.members, self._pending = made, None

    def for_c(self) -> tuple[dict[bytes, bytes], dict[bytes, bytes], dict[bytes, int]]:
        """What dnsd/_fastloop.c's `class_answer` reads: member names → class tags, the UDP
        class tables, the counts it adds to."""
        return self.members.names, self.tables["udp"], self.counts

    def answer(self, wire: bytes, client: Client, rng: random.Random) -> bytes | None:
        if not self.members.names:
            return None
        tables = self.tables[client.transport]
        address = client.address.packed
        reply = answer(
            tables, self.counts, self.members.names, wire, address, client.transport, rng
        )
        self.answered += reply is not None
        return reply

    def publish(self, memo: Any, udp: bool) -> None:
        """After a load-balanced memo's table is built: its class's table too, when its
        plan is one outcome that never expires and the reply names nothing but the
        question. `memo`: dnsd.fastpath's _LbMemo."""
        tree = memo.tree
        finished = memo.tails.get(tree) if isinstance(tree, Outcome) else None
        if finished is None or not lasting(memo.plan.plan):
            return
        if tree.all_down is not None:  # a when_all_down rule: `last_good` is per load balancer
            return
        shared = shared_table(
            tree,
            finished,
            memo.key,
            memo.client.address.packed,
            memo.serial,
            self.members,
            memo.entry.lb.name,
        )
        if shared is not None:
            tables = self.tables["udp" if udp else "tcp"]
            tables[shared[0]] = shared[1]
            memo.plan.users.append((tables, shared[0]))  # gone when the plan expires

    def __len__(self) -> int:
        return sum(map(len, self.tables.values()))

    def add_counted(self, out: dict[Any, int], keys: list[tuple[str, Any]], kind: str) -> None:
        for key, n in counted(dict(self.counts), self.members.lbs, keys, kind).items():
            out[key] = out.get(key, 0) + n

    def clear(self, folded: dict[str, dict[Any, int]], keys: list[tuple[str, Any]]) -> None:
        """Forget every table; fold the counts while the counters they name still hold."""
        for tables in self.tables.values():
            tables.clear()
        for kind, into in folded.items():
            self.add_counted(into, keys, kind)
        self.counts.clear()


def shared_table(
    tree: Outcome,
    finished: Finished,
    wire_tail: bytes,
    address: bytes,
    serial: int,
    members: Members,
    lb: str,
) -> tuple[bytes, bytes] | None:
    """(class key, table) for one member's query whose plan is one outcome (`tree`) with
    its finished reply, or None (not a member of this load balancer, or a reply that
    names something)."""
    found = class_key(b"\x00\x00" + wire_tail, members.names)
    if found is None or members.lbs.get(found[1]) != lb or tree.hints6 is not None:
        return None
    stripped = shareable(finished.reply)
    if stripped is None:
        return None
    leaf = Finished(
        stripped, finished.reply_counter, finished.lb_counter, finished.fallback_counter
    )
    return found[0], answer_table.build(tree, {tree: leaf}, address, serial).table
