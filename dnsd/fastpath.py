"""The answer cache in front of `resolve`: same bytes, a fraction of the work.

A query of the common shape (QUERY, one uncompressed question, no records but at most one
OPT of version 0) is keyed by its lower-case name, type, class and EDNS shape (DO, the UDP
size class, ECS present, COOKIE present). Everything else — and every first query of a key —
goes through `resolve` unchanged.

* Static answers are cached as finished wire bytes; per query only the ID, RD/CD, the
  question's case, the ECS echo and the COOKIE option (the client's cookie and a fresh
  server cookie for this client: what `dig` sends by default) are written in. A query
  with a cookie is never remembered by its bytes (the answer tables both serving loops
  walk), since every reply must carry a fresh server cookie.
* Load-balanced answers cache the steering *plan* per client location (region, country,
  zone, …), the plan compiled into its draws (`select.compile_plan`), and the finished
  bytes per *outcome* reached, so trickle and random selection stay statistically exact
  and the bytes equal the full path's for the same random source
  (tests/property/test_fastpath_identity.py and test_draws_explain.py check that).

What a repeated query needs is compiled into an *answer table* (dnsd.answer_table): the
draws with their cumulative weights, the finished replies, the counters each answer bumps.
Both serving loops walk that table — the pure one with `answer_table.walk`, the compiled
one in C — and every decision was made here when it was built; what a walk cannot finish
(an outcome without a reply yet, another client) comes back here with what it drew.

Caches are invalidated by generation — a new snapshot (config, served SOA serials), and health *states* (verdicts, overrides,
trickle) — never by scanning. A plan is kept by the key steering returns with it (the
client fields it read, dnsd/steering/plan_key.py) and only as long as steering says it
holds (`LbPlan.until`, `per_view`); this cache knows nothing of what steering reads.
"""

from __future__ import annotations

import random
import struct
import threading
from array import array
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

from dnslib import QTYPE, RCODE, DNSRecord
from prometheus_client.core import CounterMetricFamily

from dnsd import answer_table, lb_classes, zone_tables
from dnsd.answer_table import HIT, NEW_ORDER, NOT_CACHED, Finished, Unfit
from dnsd.config.model import LoadBalancer
from dnsd.cookies import COOKIE_OPTION
from dnsd.dnsname import NAME_BYTES, key_of_labels, wire_labels
from dnsd.dnssec.denial import compact_nxdomain
from dnsd.dnssec.signature import DAY
from dnsd.geo.ecs import ECS_OPTION, ClientSubnet
from dnsd.health.view import HealthView
from dnsd.query_view import view_of
from dnsd.reply import (
    EDNS_PAYLOAD,
    PLAIN_UDP_LIMIT,
    Client,
    QueryResult,
    count_key,
    echo_cookie,
    echo_ecs,
    fill,
    lookup_name,
    pack,
    reply_for,
)
from dnsd.request import DecisionObserver, Request
from dnsd.resolve import resolve, signer_for
from dnsd.snapshot import Snapshot
from dnsd.steering import ClientInfo, SteeringInputs
from dnsd.steering.client import client_info, locating_address, steered_type
from dnsd.steering.draws import Node, Outcome, walk
from dnsd.steering.plan import LbPlan, lasting
from dnsd.steering.plan_key import Fields, PlanKey, key_for
from dnsd.steering.records import LbAnswer
from dnsd.steering.select import build_plan, compile_plan
from dnsd.tally import CountsView
from dnsd.zone_lookup import SVC_TYPES, Lookup, lookup

MAX_ENTRIES = 100_000
MAX_TAILS = 64  # finished replies per load-balanced memo (one per outcome reached)
MAX_COUNTERS = 65536  # distinct counters the tables index (then counted and started again)
_MISSING: Any = object()
RD_CD = 0x0110
ECS_MAX = 4 + 4 + 16  # option header + family/prefixes + an IPv6 address
COOKIE_REPLY = 4 + 8 + 16  # option header + client cookie + the server cookie we make


INF = float("inf")
_new = tuple.__new__


class Parsed(NamedTuple):  # made per query: by tuple.__new__ (`_new`), the quickest
    qname: bytes  # as sent
    qtype: int
    qclass: int
    key: tuple[Any, ...]
    ecs: ClientSubnet | None
    cookie: bytes | None = None  # the client cookie (the server cookie sent is not needed)


@dataclass(frozen=True, slots=True)
class Static:
    wire: bytes  # ID 0, RD/CD clear, no ECS option (OPT RDLEN 0 when there is an OPT)


@dataclass(frozen=True, slots=True)
class Balanced:
    lb: LoadBalancer
    qtype: int  # the steered type (A for ANY)


class _PlanEntry:
    """A plan and whether it still holds; memos compiled from it check `valid`, and the
    answer tables built from it (`users`: their table and key) go when it expires."""

    __slots__ = ("plan", "users", "valid")

    def __init__(self, plan: LbPlan) -> None:
        self.plan = plan
        self.valid = True
        self.users: list[tuple[dict[bytes, bytes], bytes]] = []

    def expire(self) -> None:
        self.valid = False
        for tables, key in self.users:
            tables.pop(key, None)
        self.users.clear()


_STALE = _PlanEntry.__new__(_PlanEntry)
_STALE.valid = False
_STALE.users = []


class _LbMemo:
    """What one exact query from one client needs for a load-balanced answer: the entry,
    the parsed query, the client's location, and — while its plan holds —
    the plan compiled into draws and, per outcome reached so far, the finished reply
    (after the ID) with the counters it bumps. `outcomes` and `samples`: what the leaf and
    sample ids of its current answer table stand for."""

    __slots__ = ("client", "entry", "info", "key", "outcomes", "parsed", "plan",
                 "samples", "serial", "tables", "tails", "tree")  # fmt: skip

    def __init__(
        self, entry: Balanced, parsed: Parsed, info: ClientInfo, client: Client,
        key: bytes, tables: dict[bytes, bytes],
    ) -> None:  # fmt: skip
        self.entry, self.parsed, self.info = entry, parsed, info
        self.client = client
        self.key, self.tables = key, tables  # its answer table: tables[key]
        self.plan = _STALE  # the plan entry the draws were compiled from
        self.tree: Node | None = None
        self.tails: dict[Outcome, Finished] = {}
        self.outcomes: list[Outcome] = []
        self.samples: list[Any] = []
        self.serial = 0


def parse(wire: bytes, transport: str) -> Parsed | None:
    """The common query shape (dnsd.query_view's `usual`), or None (then the full path
    decides, FORMERR included)."""
    view = view_of(wire)
    if view is None or not view.usual:
        return None
    qname, qtype, qclass, edns = view.qname or b"", view.qtype, view.qclass, view.edns
    if len(qname) > 255:
        return None
    if edns is None:
        limit = "tcp" if transport == "tcp" else PLAIN_UDP_LIMIT
        return _new(Parsed, (qname, qtype, qclass, (qname.lower(), qtype, qclass, limit, None),
                             None, None))  # fmt: skip
    limit = "tcp" if transport == "tcp" else min(edns.payload, EDNS_PAYLOAD)
    cookie = edns.cookie[0] if edns.cookie is not None else None  # the client's cookie
    shape = (view.opts[0].flags & 0xC000, edns.ecs is not None, cookie is not None)  # DO, CO
    key = (qname.lower(), qtype, qclass, limit, shape)
    return _new(Parsed, (qname, qtype, qclass, key, edns.ecs, cookie))


class AnswerCache:
    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._snap: Snapshot | None = None  # a new object: a reload, or new served serials
        self._health_generation = -1
        self._next_expiry = float("inf")  # when the first plan with a clock stops holding
        self._signatures_until = 0.0  # signed zones: cached replies hold signatures of a day
        self._states_generation = -1
        self._entries: dict[tuple[Any, ...], Static | Balanced | None] = {}
        # Plans by what they depended on (steering's key), and per (lb, type) the field
        # lists plans of it read: a new client's key for each is looked up.
        self._plans: dict[PlanKey, _PlanEntry] = {}
        self._plan_fields: dict[tuple[str, int], list[Fields]] = {}
        self._timed_plans: list[tuple[PlanKey, _PlanEntry]] = []
        self._clients: dict[tuple[Any, ...], ClientInfo] = {}
        self._outcomes: dict[tuple[Any, ...], bytes] = {}
        # Query bytes after the ID → its answer table (dnsd.answer_table), which both
        # serving loops walk; and → the load-balanced memo the table was built from. One
        # of each per transport, since the same bytes get other limits over TCP.
        self._tables_udp: dict[bytes, bytes] = {}
        self._tables_tcp: dict[bytes, bytes] = {}
        self._memo_udp: dict[bytes, _LbMemo] = {}
        self._memo_tcp: dict[bytes, _LbMemo] = {}
        self.hits = 0
        self.misses = 0
        self.fallbacks = 0  # tables the compiled loop could not read (the Python path answered)
        # The counters the tables index: answers per reply (dnsd.reply.count_key; the
        # compiled loop bumps them), per (lb, pool, region) and fallback answers per lb. A
        # scrape reads them under the lock; they are folded when the index starts again.
        self.counters = array("q")
        self._counter_ids: dict[tuple[str, Any], int] = {}
        self._counter_keys: list[tuple[str, Any]] = []
        self._count_lock = threading.Lock()
        self._folded: dict[str, dict[Any, int]] = {"lb": {}, "fallback": {}}
        self._tally: Any = None  # where reply counts go (DnsServer's tally of this loop)
        self.lb_counts = CountsView(self.counted, "lb")
        # Told the decision of a load-balanced answer a table finished (dnstap; the other
        # paths tell the request's on_decision). None: nobody asks.
        self.note: Callable[[tuple[str, str, str]], None] | None = None
        # dnstap in the compiled loop: per counter, the dnstap `policy` field an "lb"
        # counter's answers carry (b"" for the others), made by `encode_policy` when set.
        self.encode_policy: Callable[[tuple[str, str, str]], bytes] | None = None
        self.policies: list[bytes] = []
        self.fallback_counts = CountsView(self.counted, "fallback")
        # The snapshot's zone answer tables (dnsd.zone_tables) once built, and the compiled
        # loop's answers from them by count key (it writes them; a scrape reads them).
        self._zones: zone_tables.Tables | None = None
        self._zone_counts: dict[bytes, int] = {}
        self.shared = lb_classes.ClassTables()  # a member name's first answers (its class's)

    def answer(
        self,
        wire: bytes,
        client: Client,
        snap: Snapshot,
        health: HealthView,
        rng: random.Random,
        now: float,
        on_decision: DecisionObserver | None = None,
        drawn: Node | None = None,
    ) -> bytes | None:
        """The reply to `wire`. `drawn`: the outcome the compiled loop already drew from
        this query's answer table (`outcome_of`) when it had no finished reply for it."""
        self.prepare(snap, health, now)
        # Identical queries differ only in their ID: the bytes after it are the memo key.
        tail = bytes(wire[2:])  # a no-op for the bytes sockets deliver
        udp = client.transport == "udp"
        table = (self._tables_udp if udp else self._tables_tcp).get(tail)
        if table is not None or drawn is not None:
            self.hits += 1
            code, value, order = HIT, 0, None
            if drawn is None:  # the table walked here, as the compiled loop walks it
                # the address only for a table bound to one (load-balanced): static ones are not
                address = client.address.packed if table[6] else b""  # type: ignore[index]
                code, value, order = answer_table.walk(table, address, rng)  # type: ignore[arg-type]
                if code == HIT:
                    reply, _, lb, fallback = answer_table.leaf_at(table, value)  # type: ignore[arg-type]
                    counters = self.counters
                    if lb >= 0:  # the reply itself: counted by the caller's tally
                        counters[lb] += 1
                        if self.note is not None:  # dnstap: (lb, pool, region) of this answer
                            self.note(self._counter_keys[lb][1])
                    if fallback >= 0:
                        counters[fallback] += 1
                    return wire[:2] + reply
            memo = (self._memo_udp if udp else self._memo_tcp).get(tail)
            if memo is not None:
                query = Request(wire, client, snap, health, rng, now, on_decision)
                if drawn is None and code in (NOT_CACHED, NEW_ORDER):
                    drawn = _drawn(memo, code, value, order)
                return self._balanced_memo(memo, query, drawn)
            self.hits -= 1  # drawn for a memo that is gone since: from the start
        elif self.note is None and (shared := self.shared.answer(wire, client, rng)):
            self.hits += 1
            return shared
        memo = (self._memo_udp if udp else self._memo_tcp).get(tail)
        if memo is not None:  # no table (its plan expired, or it has none): the memo's path
            self.hits += 1
            return self._balanced_memo(
                memo, Request(wire, client, snap, health, rng, now, on_decision)
            )
        query = Request(wire, client, snap, health, rng, now, on_decision)
        parsed = parse(wire, client.transport)
        if parsed is None:
            return resolve(query)
        entry = self._entries.get(parsed.key, _MISSING)
        if entry is _MISSING:
            zones = self._zones
            if zones is not None and parsed.ecs is None and parsed.cookie is None:
                answered = zone_tables.answer(zones, wire, client.transport)
                if answered is not None:  # decided by the zone data alone: nothing to remember
                    self.hits += 1
                    return answered
            self.misses += 1
            self._bound()
            return self._first(query, parsed)
        if entry is None:  # not cacheable (truncated, refused, …)
            return resolve(query)
        self.hits += 1
        self._bound()
        if isinstance(entry, Static):
            reply = _finish(entry.wire, wire, parsed, 0, _cookie_echo(query, parsed))
            if parsed.cookie is None:  # a cookie reply is fresh every time: never replayed
                tables = self._tables_udp if udp else self._tables_tcp
                counter = self._counter("reply", count_key(reply))
                tables[tail] = answer_table.static_table(reply[2:], counter)
            return reply
        return self._balanced(entry, query, parsed)

    def prepare(self, snap: Snapshot, health: HealthView, now: float) -> None:
        """Forget what a new snapshot, new health states or the clock made stale (every
        query; the compiled loop once per batch before it reads the tables)."""
        if (
            snap is not self._snap
            or health.generation != self._health_generation
            or now >= self._next_expiry
        ):
            self._refresh(snap, health, now)
        self.shared.poll()  # the load-balancer classes, until made
        if self._zones is None:  # until the tables are built (in a thread of their own)
            self._zones = zone_tables.ready(snap)

    def zone_tables(self) -> zone_tables.ForC | None:
        """What the compiled loop walks when a query has no answer table of its own: the
        snapshot's zone tables with the counts it keeps (None: not built yet)."""
        zones = self._zones
        return None if zones is None else (zones.nodes, self._zone_counts, zones.counted_qtypes)

    def tables(self, transport: str) -> dict[bytes, bytes]:
        """Query bytes after the ID → answer table (dnsd/_fastloop.c walks the UDP one; it
        is changed in place, never replaced). The counters they index: `counters`."""
        return self._tables_udp if transport == "udp" else self._tables_tcp

    def memos(self, transport: str) -> Mapping[bytes, Any]:
        """Query bytes after the ID → the load-balanced memo the tables were built from
        (read-only: what tests look into)."""
        return MappingProxyType(self._memo_udp if transport == "udp" else self._memo_tcp)

    def outcome_of(self, wire: bytes, code: int, value: int, order: Any) -> Node | None:
        """What the compiled loop's walk of `wire`'s UDP table drew, when it ended without
        a finished reply (asked before any other query changes the table), else None."""
        memo = self._memo_udp.get(bytes(wire[2:]))
        if memo is None or code not in (NOT_CACHED, NEW_ORDER):
            return None
        return _drawn(memo, code, value, order)

    def count_replies_into(self, tally: Any) -> None:
        """The compiled loop's answers are counted in `tally` (dnsd.tally.Tally:
        `count_also`, `absorb`) under their reply's count_key, as its Python path counts."""
        if self._tally is tally:  # a restarted loop asks again: counted once
            return
        self._tally = tally
        tally.count_also(self._reply_counts)

    def _reply_counts(self) -> list[tuple[bytes, int]]:
        with self._count_lock:
            return [(key, n) for (kind, key), n in zip(self._counter_keys, self.counters, strict=True)
                    if kind == "reply" and n] + list(self._zone_counts.items())  # fmt: skip

    def counted(self, kind: str) -> dict[Any, int]:
        """The counts of one kind ("lb", "fallback"): folded and current."""
        with self._count_lock:
            out = dict(self._folded[kind])
            self.shared.add_counted(out, self._counter_keys, kind)
            for (counted_kind, key), n in zip(self._counter_keys, self.counters, strict=True):
                if counted_kind == kind and n:
                    out[key] = out.get(key, 0) + n
        return out

    def _counter(self, kind: str, key: Any) -> int:
        """The index of a counter (registered on first use)."""
        index = self._counter_ids.get((kind, key))
        if index is None:
            index = self._counter_ids[(kind, key)] = len(self._counter_keys)
            encode = self.encode_policy if kind == "lb" else None
            with self._count_lock:
                self._counter_keys.append((kind, key))
                self.counters.append(0)
                self.policies.append(encode(key) if encode is not None else b"")
        return index

    def _restart_counters(self) -> None:
        """Fold the counts and start the index again (every table is gone by now)."""

        def take() -> list[tuple[bytes, int]]:
            with self._count_lock:
                replies = []
                for (kind, key), n in zip(self._counter_keys, self.counters, strict=True):
                    if kind == "reply":
                        replies.append((key, n))
                    elif n:
                        self._folded[kind][key] = self._folded[kind].get(key, 0) + n
                self._counter_ids, self._counter_keys = {}, []
                self.counters = array("q")
                self.policies = []
            return replies

        if self._tally is not None:
            self._tally.absorb(take)
        else:
            take()

    # -- generations ----------------------------------------------------------------------
    def _refresh(self, snap: Snapshot, health: HealthView, now: float) -> None:
        signatures_renewed = bool(snap.signing) and now >= self._signatures_until
        if (
            snap is not self._snap
            or health.states_generation != self._states_generation
            or signatures_renewed
        ):
            if snap is not self._snap:
                self._zones = None  # the new snapshot's, once built
            self._snap = snap
            if snap.signing:  # cached signed replies hold this day's signatures
                self._signatures_until = (int(now) // DAY + 1) * DAY
            self._states_generation = health.states_generation
            self._entries.clear()
            self._clients.clear()
            self._outcomes.clear()
            self._clear_tables()
            self.shared.refresh(snap, health)  # after the tables: their counts are folded
        if health.generation != self._health_generation or now >= self._next_expiry:
            # New RTTs, or a sample some plan used ages out: RTT-steered plans expire.
            self._health_generation = health.generation
            self._next_expiry = self._signatures_until if snap.signing else float("inf")
            for bucket, entry in self._timed_plans:
                entry.expire()
                self._plans.pop(bucket, None)
            self._timed_plans.clear()

    def _clear_tables(self) -> None:
        for table in (self._tables_udp, self._tables_tcp, self._memo_udp, self._memo_tcp):
            table.clear()
        with self._count_lock:
            self.shared.clear(self._folded, self._counter_keys)
        self._plan_fields.clear()
        for entry in self._plans.values():
            entry.valid = False
        self._plans.clear()
        self._timed_plans.clear()
        if len(self._counter_keys) > MAX_COUNTERS:
            self._restart_counters()

    def _bound(self) -> None:
        """Memory stays bounded: a table over its size starts again (checked on misses,
        the only time the tables grow)."""
        limit = self.max_entries
        if len(self._entries) > limit or len(self._outcomes) > limit:
            self._entries.clear()
            self._outcomes.clear()
        if (
            len(self._tables_udp) + len(self._tables_tcp) + len(self.shared) > limit
            or len(self._memo_udp) + len(self._memo_tcp) > limit
            or len(self._plans) > limit
            or len(self._counter_keys) > MAX_COUNTERS
        ):
            self._clear_tables()
        if len(self._clients) > limit:
            self._clients.clear()

    # -- the first query of a key: the full path, then remember what can be reused ---------
    def _first(self, query: Request, parsed: Parsed) -> bytes | None:
        name = _name_text(parsed.qname)
        if name is None or not _plain_class(parsed):
            self._entries[parsed.key] = None  # unusual names and classes: always the full path
            return resolve(query)
        snap = query.snap
        found = lookup(snap, name, parsed.qtype)
        if found.lb is not None:
            entry = Balanced(found.lb, steered_type(parsed.qtype))
            self._entries[parsed.key] = entry
            return self._balanced(entry, query, parsed)
        if snap.signing and parsed.cookie is None:  # the compact denial echoes no cookie
            denial = _compact_denial(query, parsed, found)
            if denial is not None:
                # Not kept: names that do not exist are what floods are made of, and a
                # table growing with them would evict the cache's answers (and feed the
                # garbage collector's full passes); a denial costs one signature anyway.
                return denial
        reply = resolve(query)
        self._entries[parsed.key] = _static_entry(reply, parsed, _cookie_echo(query, parsed))
        return reply

    # -- load-balanced names ------------------------------------------------------------------
    def _balanced(self, entry: Balanced, query: Request, parsed: Parsed) -> bytes | None:
        client = query.client
        ckey = address, ecs_prefix = locating_address(client.address, parsed.ecs)
        info = self._clients.get(ckey)
        if info is None:
            info = client_info(query.snap, address, ecs_prefix)
            self._clients[ckey] = info
        udp, key = client.transport == "udp", bytes(query.wire[2:])
        tables = self._tables_udp if udp else self._tables_tcp
        memo = _LbMemo(entry, parsed, info, client, key, tables)
        if parsed.cookie is None:  # a cookie reply is fresh every time: never replayed
            (self._memo_udp if udp else self._memo_tcp)[key] = memo
            tables.pop(key, None)  # another client's table, if any: this memo publishes its own
        return self._balanced_memo(memo, query)

    def _balanced_memo(
        self, memo: _LbMemo, query: Request, drawn: Node | None = None
    ) -> bytes | None:
        """The general load-balanced case; also (re)compiles the memo's draws. `drawn`: the
        outcome the caller already drew from the current compiled tree (no second draw)."""
        entry, parsed, info, client = memo.entry, memo.parsed, memo.info, query.client
        if memo.client is not client:
            if memo.client.address != client.address:  # the memo is per client address
                return self._balanced(entry, query, parsed)
            memo.client = client
        held = memo.plan if memo.plan.valid else self._plan_for(entry, info, query)
        changed = memo.plan is not held
        if changed:
            memo.plan = held
            memo.tree = compile_plan(held.plan, info.subnet_key())
            memo.tails = {}
            held.users.append((memo.tables, memo.key))
        # (`drawn` may end in draws still to make: an HTTPS answer's IPv6 hints after a Sample)
        outcome = walk(drawn or memo.tree, query.rng)  # type: ignore[arg-type]  # compiled above
        decided = LbAnswer(entry.lb.name, entry.lb.ttl, outcome, entry.qtype in SVC_TYPES)
        if query.on_decision is not None:
            query.on_decision(
                entry.lb.name, outcome.pool, info.location.region, decided.by_fallback
            )
        scope = outcome.scope if parsed.ecs is not None and info.ecs_prefix else 0
        answer = (outcome.addresses, outcome.cname, scope, outcome.all_down, outcome.hints6)
        okey = (parsed.key, *answer)
        cookie = _cookie_echo(query, parsed)
        template = self._outcomes.get(okey)
        if template is None:
            rendered = _render(query.wire, client, query.snap, decided, info, query.now)
            template = _template(rendered, parsed, cookie)
            if template is None:
                return rendered  # too large to patch safely: not cached
            self._outcomes[okey] = template
        reply = _finish(template, query.wire, parsed, scope, cookie)
        # bounded: a Sample over many backends has many outcomes
        if parsed.cookie is None and outcome not in memo.tails and len(memo.tails) < MAX_TAILS:
            counted = (entry.lb.name, outcome.pool or "-", info.location.region or "-")
            fallback = self._counter("fallback", entry.lb.name) if decided.by_fallback else -1
            memo.tails[outcome] = Finished(reply[2:], self._counter("reply", count_key(reply)),
                                           self._counter("lb", counted), fallback)  # fmt: skip
            changed = True
        if changed or memo.key not in memo.tables:
            self._publish(memo)
        return reply

    def _plan_for(self, entry: Balanced, info: ClientInfo, query: Request) -> _PlanEntry:
        """The plan held for this client's key (steering's: the fields plans of this load
        balancer read), else a new one, kept by its key until it stops holding."""
        lb, qtype = entry.lb.name, entry.qtype
        shapes = self._plan_fields.setdefault((lb, qtype), [])
        for fields in shapes:
            held = self._plans.get(key_for(lb, qtype, fields, info))
            if held is not None:
                return held
        inputs = SteeringInputs(query.snap, query.health, info, query.rng, query.now)
        plan = build_plan(inputs, entry.lb, qtype)
        key = plan.key
        assert key is not None  # set for a located client
        held = self._plans[key] = _PlanEntry(plan)
        if key[2] not in shapes:
            shapes.append(key[2])
        if not lasting(plan):  # a ramp's step ends, an RTT sample ages out, a new view
            self._timed_plans.append((key, held))
            self._next_expiry = min(self._next_expiry, plan.until)
        return held

    def _publish(self, memo: _LbMemo) -> None:
        """Build the memo's answer table: every decision for its next queries, made here."""
        if memo.tree is None or not memo.plan.valid or memo.parsed.cookie is not None:
            return  # (a cookie reply is fresh every time: never replayed)
        memo.serial += 1
        try:
            built = answer_table.build(memo.tree, memo.tails, memo.client.address.packed,
                                       memo.serial)  # fmt: skip
        except Unfit:  # weights no walk could compare: the memo's path answers
            memo.tables.pop(memo.key, None)
            return
        memo.outcomes, memo.samples = built.outcomes, built.samples
        memo.tables[memo.key] = built.table
        self.shared.publish(memo, memo.tables is self._tables_udp)


class AnswerCaches:
    """Every answer cache of one server — the event loop's and each UDP thread's own — and
    their Prometheus collector: `dnsd_answer_cache_total` counts all of them."""

    def __init__(self) -> None:
        self.caches: list[AnswerCache] = []

    def new(self) -> AnswerCache:
        cache = AnswerCache()
        self.caches.append(cache)
        return cache

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily("dnsd_answer_cache", "Answer cache lookups", labels=["result"])
        caches = list(self.caches)
        family.add_metric(["hit"], sum(cache.hits for cache in caches))
        family.add_metric(["miss"], sum(cache.misses for cache in caches))
        yield family
        yield CounterMetricFamily(
            "dnsd_compiled_loop_fallbacks",
            "Answer tables the compiled serving loop could not read (the Python path answered)",
            value=sum(cache.fallbacks for cache in caches),
        )


def _name_text(qname: bytes) -> str | None:
    """Wire labels → "www.example.test." in lower case; None for bytes no config name has."""
    labels = wire_labels(qname)
    if not all(set(label) <= NAME_BYTES for label in labels):
        return None
    return key_of_labels(labels)


def _plain_class(parsed: Parsed) -> bool:
    return parsed.qclass in (1, 255) and parsed.qtype not in (QTYPE.AXFR, QTYPE.IXFR, QTYPE.OPT)


def _render(
    wire: bytes, client: Client, snap: Snapshot, answer: LbAnswer, info: ClientInfo,
    now: float,
) -> bytes:  # fmt: skip
    """The full path's reply for this query (of the usual shape, `parse`) and this decision
    (no draws here)."""
    query = DNSRecord.parse(wire)
    edns = view_of(wire).edns  # type: ignore[union-attr]
    reply = reply_for(query, edns)
    found = lookup(snap, lookup_name(query.q.qname), query.q.qtype)
    fill(reply, found, query, answer)
    result = QueryResult(reply, edns, answer, client=info)
    echo_ecs(result)
    echo_cookie(result, snap.node.cookies, client.address, now)
    return pack(reply, client.transport, edns, sign=signer_for(snap, found.zone, edns, now))


def _compact_denial(query: Request, parsed: Parsed, found: Lookup) -> bytes | None:
    """A DO=1 query for a name a signed zone does not have: its signed denial made straight
    from the query bytes (dnsd.dnssec.denial, the same bytes as the full path), so a
    random-name flood costs one signature per query and nothing more."""
    zone = found.zone
    if (
        found.rcode != RCODE.NXDOMAIN or found.answer or zone is None
        or not parsed.key[4] or not parsed.key[4][0] & 0x8000
        or parsed.qtype in (QTYPE.NSEC, 128)  # NSEC: an answer; NXNAME: FORMERR
    ):  # fmt: skip
        return None
    keys = query.snap.signing.get(zone.name)
    if keys is None:
        return None
    echo = parsed.ecs.echo(0) if parsed.ecs is not None else None
    co = bool(parsed.key[4][0] & 0x4000)  # the query's CO flag (RFC 9824 §4)
    return compact_nxdomain(query.wire, parsed.qname, parsed.qtype, zone, keys, query.now,
                            echo, parsed.key[3], co)  # fmt: skip


def _static_entry(reply: bytes | None, parsed: Parsed, cookie: bytes | None) -> Static | None:
    if reply is None or reply[2] & 0x02:  # nothing to reuse, or truncated (size-dependent)
        return None
    wire = _template(reply, parsed, cookie)
    return None if wire is None else Static(wire)


def _template(reply: bytes, parsed: Parsed, cookie: bytes | None) -> bytes | None:
    """The reply without what is written per query: the COOKIE option (`cookie`: the one
    echoed, which the full path writes last) and the ECS echo before it."""
    if cookie is None:
        return _strip_ecs(reply, parsed)
    without = _strip_cookie(reply, parsed, cookie)
    return None if without is None else _strip_ecs(without, parsed)


def _strip_cookie(reply: bytes, parsed: Parsed, cookie: bytes) -> bytes | None:
    """The reply without its last OPT option, the cookie echo, and OPT's RDLEN shortened to
    match; None when the reply does not end as expected (then it is not cached)."""
    echo = 4 + 4 + len(parsed.ecs.raw_address) if parsed.ecs is not None else 0
    at = len(reply) - COOKIE_REPLY - echo - 2  # OPT's RDLEN
    if (
        len(cookie) != COOKIE_REPLY
        or at < 12
        or reply[len(reply) - COOKIE_REPLY : len(reply) - 16] != cookie[:12]
        or struct.unpack_from("!H", reply, at)[0] != echo + COOKIE_REPLY
    ):
        return None
    out = bytearray(reply[:-COOKIE_REPLY])
    struct.pack_into("!H", out, at, echo)
    return bytes(out)


def _cookie_echo(query: Request, parsed: Parsed) -> bytes | None:
    """The COOKIE option the reply to this query carries (RFC 7873 §5.2: the client's
    cookie and a fresh server cookie for this client), or None (no cookie, or the server
    does not answer cookies)."""
    cookies = query.snap.node.cookies
    if parsed.cookie is None or cookies is None:
        return None
    client = parsed.cookie
    server = cookies.make(client, query.client.address, query.now)
    return struct.pack("!HH", COOKIE_OPTION, len(client) + len(server)) + client + server


def _strip_ecs(reply: bytes, parsed: Parsed) -> bytes | None:
    """The reply without the ECS echo (OPT is last; its RDATA is the echo alone), with ID 0
    and RD/CD clear, ready for `_finish`. None when an echo could make it too large."""
    if reply[2] & 0x02:
        return None
    out = bytearray(reply)
    out[0:2] = b"\x00\x00"
    out[2] &= ~(RD_CD >> 8) & 0xFF
    out[3] &= ~(RD_CD & 0xFF) & 0xFF
    if parsed.ecs is not None:
        echo = 4 + 4 + len(parsed.ecs.raw_address)
        del out[len(out) - echo :]
        out[len(out) - 2 : len(out)] = b"\x00\x00"  # OPT RDLEN: the echo is written per query
    limit = parsed.key[3]
    room = ECS_MAX + (COOKIE_REPLY if parsed.cookie is not None else 0)
    if limit != "tcp" and len(out) + room > limit:
        return None
    return bytes(out)


def _finish(
    template: bytes, wire: bytes, parsed: Parsed, scope: int, cookie: bytes | None = None
) -> bytes:
    out = bytearray(template)
    out[0:2] = wire[0:2]
    out[2] |= wire[2] & (RD_CD >> 8)
    out[3] |= wire[3] & (RD_CD & 0xFF)
    out[12 : 12 + len(parsed.qname)] = parsed.qname
    options = b""
    if parsed.ecs is not None:
        echo = parsed.ecs.echo(scope)
        options = struct.pack("!HH", ECS_OPTION, len(echo)) + echo
    if cookie is not None:  # after the ECS echo, as the full path writes them
        options += cookie
    if options:
        out[len(out) - 2 : len(out)] = struct.pack("!H", len(options))  # OPT RDLEN (was 0)
        out += options
    return bytes(out)


__all__ = ["AnswerCache", "AnswerCaches", "parse"]


def _drawn(memo: _LbMemo, code: int, value: int, order: Any) -> Node:
    """The outcome a walk of the memo's table reached without a finished reply."""
    if code == NOT_CACHED:
        return memo.outcomes[value]
    return memo.samples[value].outcome(order)
