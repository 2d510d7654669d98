"""Class answer tables: a load-balanced name's first answer from its class's compiled plan.

Load balancers of one shape (dnsd.lb_shapes: alike but for their name, their pools' names
and their backends' addresses) whose slots are in the same health state form a *class*:
for the same client they decide alike, on slots (pool k, backend j) rather than addresses.
When the answer cache has compiled one member's plan into an answer table with a single
outcome (no draws, no expiry: docs/development.md says which), it also publishes that table
under the *class key* — the class's tag, then the query's bytes after the ID without its
question name — with the reply stored without its question and each record's address
replaced by its slot's number. A query for another member, asked for the first time,
finds it: both serving loops (`answer` here, `class_answer` in dnsd/_fastloop.c: the same
steps) copy the question from the query in between and each slot's address from the
member's address vector, so no Python runs per name. Only replies whose records all point
at the question's name (0xC00C) and carry an address as their data (A and AAAA answers, an
OPT record last) are shared. Answers are counted per member name and counters of the
member that built the table (`counts`: lower-case name + those counters → answers), and
folded into the member's own load balancer and pool when the metrics read them.
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
from dnsd.health.view import HealthView, change_between
from dnsd.lb_shapes import Shape, addressed, health_tag, shapes, slotted
from dnsd.reply import EDNS_PAYLOAD, PLAIN_UDP_LIMIT, Client
from dnsd.snapshot import Snapshot
from dnsd.steering.draws import Outcome
from dnsd.steering.plan import lasting
from dnsd.zone_tables.templates import key as wire_key

log = logging.getLogger("dnsd.lb_classes")
SYNC_NAMES: Final = 500  # at most this many names: made at once (a few milliseconds)
COUNTED = struct.Struct("<ii")  # after the name in a count key: lb counter, fallback counter
_RR_HEAD = struct.Struct("!HHHIH")  # pointer, type, class, TTL, RDLENGTH
_SHAREABLE_TYPES: Final = frozenset({1, 28})  # A, AAAA: no name in their data


class Base:
    """Per snapshot: each load-balanced owner name (lower-case wire form) an ordinary
    query reaches → its load balancer (`lbs`), every load balancer's shape, and the
    member names by load balancer (a health change retags those of the load balancers
    it reaches, as the snapshot's LB graph says)."""

    __slots__ = ("compiled", "config", "graph", "lbs", "names_of", "shapes", "signed", "untagged")

    def __init__(self, snap: Snapshot, lbs: dict[bytes, str]) -> None:
        self.config, self.lbs = snap.config, lbs
        self.compiled, self.signed = snap.compiled, frozenset(snap.signing)
        self.untagged: Members | None = None
        self.shapes = shapes(snap.config, snap.lb_graph) if lbs else {}
        self.graph = snap.lb_graph
        self.names_of: dict[str, list[bytes]] = {}
        for key, lb in lbs.items():
            self.names_of.setdefault(lb, []).append(key)

    def value(self, lb: str, health: HealthView) -> bytes:
        """What both loops read for a member name: the tag's length, the tag (the shape
        and its slots' health), then the address vector."""
        shape = self.shapes[lb]
        tag = health_tag(shape, health, self.config.pools)
        return bytes([len(tag)]) + tag + shape.vector


class Members:
    """Per snapshot and health view: each member name → its tag and address vector
    (`names`, what both loops read: `Base.value`) and its load balancer (`lbs`); `full`:
    every member, those with a state of their own too."""

    __slots__ = ("base", "full", "health", "lbs", "names", "shapes")

    def __init__(
        self,
        names: dict[bytes, bytes],
        lbs: Mapping[bytes, str],
        base: Base | None = None,
        health: HealthView | None = None,
        full: dict[bytes, bytes] | None = None,
    ) -> None:
        self.names, self.lbs = names, lbs  # never changed once made
        self.base, self.health, self.full = base, health, names if full is None else full
        self.shapes: Mapping[str, Shape] = base.shapes if base is not None else {}


NONE = Members({}, {})


class _Build:
    """A snapshot's members, made in a thread of their own when the snapshot is big (the
    classes of 10,000 load balancers take about a second): None until then."""

    def __init__(self, snap: Snapshot, background: bool | None) -> None:
        self.done = threading.Event()
        self.members: Base | None = _made_for(snap)
        if self.members is not None:
            self.done.set()
            return
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
            base = Base(snap, _members(snap))
            # tagged with no health known (all up): a view with few states starts from it
            base.untagged = members(snap, HealthView(), None, base)
            for zone in snap.compiled.values():  # for the snapshots made from this one
                zone.derived.put("lb classes", base)
                break
            self.members = base
        except Exception:  # a bug here costs speed, never answers: Python answers all
            log.exception("load-balancer class tables not built: each name answered on its own")
            self.members = Base(snap, {})
        finally:
            self.done.set()


class _Tagging:
    """The members of a snapshot tagged with a health view (`wanted`), made in a thread of
    their own when there are many (10,000 names take ~30 ms: not on the serving thread):
    None until then."""

    def __init__(self, snap: Snapshot, health: HealthView, before: Members | None) -> None:
        self.wanted = (snap, health)
        self.members: Members | None = None
        build = snap.derived.get("lb classes", lambda: _Build(snap, None))
        if build.members is not None and len(build.members.lbs) <= SYNC_NAMES:
            self.members = members(snap, health, before)
        else:
            threading.Thread(
                target=self._run, args=(build, before), name="dnsd lb tags", daemon=True
            ).start()

    def _run(self, build: _Build, before: Members | None) -> None:
        build.done.wait()
        try:
            self.members = members(*self.wanted, before)
        except Exception:  # a bug here costs speed, never answers: Python answers all
            log.exception("load-balancer class tables not tagged: each name answered on its own")
            self.members = NONE


def _made_for(snap: Snapshot) -> Base | None:
    """The members of a snapshot this one was made from with new SOA serials or keys at
    its apexes (the same config and compiled zones, the same zones signed): the same."""
    for zone in snap.compiled.values():
        base = zone.derived.peek("lb classes")
        if (
            isinstance(base, Base)
            and base.config is snap.config
            and base.compiled is snap.compiled
            and base.signed == frozenset(snap.signing)
        ):
            return base
        break
    return None


def prepare(snap: Snapshot) -> None:
    """Make the snapshot's members now, in this thread (loading: served from the first
    query)."""
    snap.derived.get("lb classes", lambda: _Build(snap, False))


def members(
    snap: Snapshot, health: HealthView, before: Members | None = None, base: Base | None = None
) -> Members | None:
    """The snapshot's members tagged with `health` (None while the snapshot's are being
    made), but for the load balancers with a state of their own in `health` — a trickle
    override or ramp, a ramp of their regions: they decide otherwise than their class (a
    new states generation asks again). `before`: the same snapshot's members at an earlier
    view, of which only the names on pools whose health changed are tagged again."""
    if base is None:
        base = snap.derived.get("lb classes", lambda: _Build(snap, None)).members
    if base is None:
        return None
    if before is None or before.base is not base:
        before = base.untagged
    if before is not None and before.base is base and before.health is not None:
        changed = change_between(before.health, health).pools
        full = dict(before.full) if changed else before.full
        for lb in base.graph.reached_lbs(changed) if changed else ():
            for key in base.names_of.get(lb, ()):
                full[key] = base.value(lb, health)
    else:
        values: dict[str, bytes] = {}  # per load balancer: several names may share one
        full = {}
        for key, lb in base.lbs.items():
            value = values.get(lb)
            if value is None:
                value = values[lb] = base.value(lb, health)
            full[key] = value
    own = {*health.trickle_overrides, *health.trickle_ramps, *(lb for lb, _ in health.ramps)}
    if not own:
        return Members(full, base.lbs, base, health)
    kept = [key for key, lb in base.lbs.items() if lb not in own]
    names = {key: full[key] for key in kept}
    return Members(names, {key: base.lbs[key] for key in kept}, base, health, full)


def _members(snap: Snapshot) -> dict[bytes, str]:
    """Each load-balanced owner name an ordinary query reaches → its load balancer."""
    apexes = set(snap.zones)
    lb_names = snap.config.load_balancers
    lbs: dict[bytes, str] = {}
    for apex, zone in snap.zones.items():
        if apex in snap.signing:  # signed answers carry signatures: Python's
            continue
        for name, node in zone.nodes.items():
            if node.lb is None or node.lb.name not in lb_names or "*" in name:
                continue
            if _shadowed(name, apex, apexes, zone.cuts, zone.dnames):
                continue
            lbs[_wire(name)] = node.lb.name
    return lbs


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


def class_key(wire: bytes, names: Mapping[bytes, bytes]) -> tuple[bytes, bytes, int, bytes] | None:
    """(the class key, the lower-case name, the question's end, the member's address
    vector) of a query for a member name, else None: the same steps as dnsd/_fastloop.c's
    `class_answer`."""
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
    value = names.get(lowered)
    if value is None:
        return None
    end = 1 + value[0]
    return value[1:end] + bytes(wire[2:12]) + bytes(wire[pos + 1 :]), lowered, qend, value[end:]


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
    key, lowered, qend, vector = found
    table = tables.get(key)
    if table is None:
        return None
    code, at, _ = answer_table.walk(table, address, rng)
    if code != HIT:
        return None
    stored, _, lb, fallback = answer_table.leaf_at(table, at)  # the reply: the caller's tally
    records = addressed(stored, vector)
    if records is None:
        return None
    reply = wire[:2] + stored[:10] + wire[12:qend] + records
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
    counts: Mapping[bytes, int],
    lbs: Mapping[bytes, str],
    keys: list[tuple[str, Any]],
    kind: str,
    shaped: Mapping[str, Shape] | None = None,
) -> dict[Any, int]:
    """The class tables' answers of one kind ("lb", "fallback"), each under its member's
    own load balancer (and for "lb" its own pool in the builder's pool's place): (lb, pool,
    region) and lb as the cache counts them."""
    shaped = shaped or {}
    out: dict[Any, int] = {}
    for key, n in counts.items():
        name = key[: -COUNTED.size]
        lb, fallback = COUNTED.unpack_from(key, len(name))
        member = lbs.get(name)
        index = lb if kind == "lb" else fallback
        if member is None or not 0 <= index < len(keys):
            continue
        value = keys[index][1]
        mine: Any = member
        if kind == "lb":
            pool, built, own = value[1], shaped.get(value[0]), shaped.get(member)
            if built is not None and own is not None and pool in built.pools:
                pool = own.pools[built.pools.index(pool)]
            mine = (member, pool, *value[2:])
        out[mine] = out.get(mine, 0) + n
    return out


class ClassTables:
    """One answer cache's class tables (per transport: class key → table), the snapshot's
    members and the answers counted per member name and counters."""

    def __init__(self) -> None:
        self.members = NONE
        self._pending: tuple[Snapshot, HealthView] | None = None
        self._made: Members | None = None  # the last members made: the next start from them
        self._tagging: _Tagging | None = None
        self.tables: dict[str, dict[bytes, bytes]] = {"udp": {}, "tcp": {}}
        self.counts: dict[bytes, int] = {}
        self.answered = 0  # by the Python walk (the compiled loop's: in `counts`)

    def refresh(self, snap: Snapshot, health: HealthView) -> None:
        """A new snapshot or new states: the members they make (none until made)."""
        self.members, self._pending = NONE, (snap, health)
        self.poll()

    def poll(self) -> None:
        """Take the members once made (every batch: one test while none is pending)."""
        if self._pending is None:
            return
        snap, health = self._pending
        job = self._tagging
        if job is None or job.wanted[0] is not snap or job.wanted[1] is not health:
            job = self._tagging = _Tagging(snap, health, self._made)
        if job.members is not None:
            self.members = self._made = job.members
            self._pending = self._tagging = None

    def for_c(self) -> tuple[dict[bytes, bytes], dict[bytes, bytes], dict[bytes, int]]:
        """What dnsd/_fastloop.c's `class_answer` reads: member names → tags and address
        vectors, the UDP class tables, the counts it adds to."""
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
        question. `memo`: dnsd.fastpath.memo.LbMemo."""
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
        members = self.members
        for key, n in counted(dict(self.counts), members.lbs, keys, kind, members.shapes).items():
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
    shape = members.shapes.get(lb)
    if stripped is not None and shape is not None:
        stripped = slotted(stripped, shape.addresses)
    if stripped is None:
        return None
    leaf = Finished(
        stripped, finished.reply_counter, finished.lb_counter, finished.fallback_counter
    )
    return found[0], answer_table.build(tree, {tree: leaf}, address, serial).table
