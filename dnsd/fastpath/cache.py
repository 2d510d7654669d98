"""The answer cache: a query's first answer from the full path (`resolve`), what can be
reused remembered, and compiled into answer tables both serving loops walk (module
docstring of dnsd.fastpath: what is kept and when it goes)."""

from __future__ import annotations

import random
from array import array
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from prometheus_client.core import CounterMetricFamily

from dnsd import answer_table, lb_classes, zone_tables
from dnsd.answer_table import HIT, NEW_ORDER, NOT_CACHED, Finished, Unfit
from dnsd.dnssec.signature import DAY
from dnsd.fastpath.counters import AnswerCounters
from dnsd.fastpath.memo import Balanced, LbMemo, PlanEntry, Static, drawn_outcome
from dnsd.fastpath.query_key import Parsed, name_text, parse, plain_class
from dnsd.fastpath.replies import (
    compact_denial,
    cookie_echo,
    finish,
    render,
    reusable,
    static_entry,
)
from dnsd.health.view import HealthView
from dnsd.reply import Client, count_key
from dnsd.request import DecisionObserver, Request
from dnsd.resolve import resolve
from dnsd.snapshot import Snapshot
from dnsd.steering import ClientInfo, SteeringInputs
from dnsd.steering.client import client_info, locating_address, steered_type
from dnsd.steering.draws import Node, walk
from dnsd.steering.plan import lasting
from dnsd.steering.plan_key import Fields, PlanKey, key_for
from dnsd.steering.records import LbAnswer
from dnsd.steering.select import build_plan, compile_plan
from dnsd.tally import CountsView
from dnsd.zone_lookup import SVC_TYPES, lookup

MAX_ENTRIES = 100_000
MAX_TAILS = 64  # finished replies per load-balanced memo (one per outcome reached)
_MISSING: Any = object()


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
        self._plans: dict[PlanKey, PlanEntry] = {}
        self._plan_fields: dict[tuple[str, int], list[Fields]] = {}
        self._timed_plans: list[tuple[PlanKey, PlanEntry]] = []
        self._clients: dict[tuple[Any, ...], ClientInfo] = {}
        self._outcomes: dict[tuple[Any, ...], bytes] = {}
        # Query bytes after the ID → its answer table (dnsd.answer_table), which both
        # serving loops walk; and → the load-balanced memo the table was built from. One
        # of each per transport, since the same bytes get other limits over TCP.
        self._tables_udp: dict[bytes, bytes] = {}
        self._tables_tcp: dict[bytes, bytes] = {}
        self._memo_udp: dict[bytes, LbMemo] = {}
        self._memo_tcp: dict[bytes, LbMemo] = {}
        self.hits = 0
        self.misses = 0
        self.fallbacks = 0  # tables the compiled loop could not read (the Python path answered)
        self.counts = AnswerCounters()  # what the tables count; read by scrapes
        self.lb_counts = CountsView(self.counted, "lb")
        # Told the decision of a load-balanced answer a table finished (dnstap; the other
        # paths tell the request's on_decision). None: nobody asks.
        self.note: Callable[[tuple[str, str, str]], None] | None = None
        self.fallback_counts = CountsView(self.counted, "fallback")
        # The snapshot's zone answer tables (dnsd.zone_tables) once built.
        self._zones: zone_tables.Tables | None = None
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
                    counters = self.counts.values
                    if lb >= 0:  # the reply itself: counted by the caller's tally
                        counters[lb] += 1
                        if self.note is not None:  # dnstap: (lb, pool, region) of this answer
                            self.note(self.counts.keys[lb][1])
                    if fallback >= 0:
                        counters[fallback] += 1
                    return wire[:2] + reply
            memo = (self._memo_udp if udp else self._memo_tcp).get(tail)
            if memo is not None:
                query = Request(wire, client, snap, health, rng, now, on_decision)
                if drawn is None and code in (NOT_CACHED, NEW_ORDER):
                    drawn = drawn_outcome(memo, code, value, order)
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
            reply = finish(entry.wire, wire, parsed, 0, cookie_echo(query, parsed))
            if parsed.cookie is None:  # a cookie reply is fresh every time: never replayed
                tables = self._tables_udp if udp else self._tables_tcp
                counter = self.counts.index("reply", count_key(reply))
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
        return None if zones is None else zones.for_c(self.counts.zone_counts)

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
        return drawn_outcome(memo, code, value, order)

    @property
    def counters(self) -> array[int]:
        """What the tables' leaves bump, by index (the compiled loop bumps them in place)."""
        return self.counts.values

    @property
    def policies(self) -> list[bytes]:
        return self.counts.policies

    def count_replies_into(self, tally: Any) -> None:
        self.counts.count_replies_into(tally)

    def counted(self, kind: str) -> dict[Any, int]:
        """The counts of one kind ("lb", "fallback"): folded and current."""
        counts = self.counts
        return counts.counted(kind, lambda out: self.shared.add_counted(out, counts.keys, kind))

    def record_batch(self, answered: int, fallbacks: int) -> None:
        """What one batch of the compiled loop did: `answered` from the tables, `fallbacks`
        tables it could not read (the Python path answered those)."""
        self.hits += answered
        self.fallbacks += fallbacks

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
        counts = self.counts
        with counts.lock:
            self.shared.clear(counts.folded, counts.keys)
        self._plan_fields.clear()
        for entry in self._plans.values():
            entry.valid = False
        self._plans.clear()
        self._timed_plans.clear()
        if counts.full():
            counts.restart()

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
            or self.counts.full()
        ):
            self._clear_tables()
        if len(self._clients) > limit:
            self._clients.clear()

    # -- the first query of a key: the full path, then remember what can be reused ---------
    def _first(self, query: Request, parsed: Parsed) -> bytes | None:
        name = name_text(parsed.qname)
        if name is None or not plain_class(parsed):
            self._entries[parsed.key] = None  # unusual names and classes: always the full path
            return resolve(query)
        snap = query.snap
        found = lookup(snap, name, parsed.qtype)
        if found.lb is not None:
            entry = Balanced(found.lb, steered_type(parsed.qtype))
            self._entries[parsed.key] = entry
            return self._balanced(entry, query, parsed)
        if snap.signing and parsed.cookie is None:  # the compact denial echoes no cookie
            denial = compact_denial(query, parsed, found)
            if denial is not None:
                # Not kept: names that do not exist are what floods are made of, and a
                # table growing with them would evict the cache's answers (and feed the
                # garbage collector's full passes); a denial costs one signature anyway.
                return denial
        reply = resolve(query)
        self._entries[parsed.key] = static_entry(reply, parsed, cookie_echo(query, parsed))
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
        memo = LbMemo(entry, parsed, info, client, key, tables)
        if parsed.cookie is None:  # a cookie reply is fresh every time: never replayed
            (self._memo_udp if udp else self._memo_tcp)[key] = memo
            tables.pop(key, None)  # another client's table, if any: this memo publishes its own
        return self._balanced_memo(memo, query)

    def _balanced_memo(
        self, memo: LbMemo, query: Request, drawn: Node | None = None
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
        cookie = cookie_echo(query, parsed)
        template = self._outcomes.get(okey)
        if template is None:
            rendered = render(query.wire, client, query.snap, decided, info, query.now)
            template = reusable(rendered, parsed, cookie)
            if template is None:
                return rendered  # too large to patch safely: not cached
            self._outcomes[okey] = template
        reply = finish(template, query.wire, parsed, scope, cookie)
        # bounded: a Sample over many backends has many outcomes
        if parsed.cookie is None and outcome not in memo.tails and len(memo.tails) < MAX_TAILS:
            counted = (entry.lb.name, outcome.pool or "-", info.location.region or "-")
            fallback = self.counts.index("fallback", entry.lb.name) if decided.by_fallback else -1
            memo.tails[outcome] = Finished(reply[2:], self.counts.index("reply", count_key(reply)),
                                           self.counts.index("lb", counted), fallback)  # fmt: skip
            changed = True
        if changed or memo.key not in memo.tables:
            self._publish(memo)
        return reply

    def _plan_for(self, entry: Balanced, info: ClientInfo, query: Request) -> PlanEntry:
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
        held = self._plans[key] = PlanEntry(plan)
        if key[2] not in shapes:
            shapes.append(key[2])
        if not lasting(plan):  # a ramp's step ends, an RTT sample ages out, a new view
            self._timed_plans.append((key, held))
            self._next_expiry = min(self._next_expiry, plan.until)
        return held

    def _publish(self, memo: LbMemo) -> None:
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
