"""A zone's load-balanced answers as transferred, kept so that a new health view costs
O(what it changes), not O(names) (every health event re-steered every name).

Load balancers configured alike but for their name decide alike: they form a *class*, and
a class is steered once per view. What a view change touches: the classes that can answer
from a pool whose backends' verdicts or overrides changed (nested load balancers and
fallback pools included), those with a trickle override that changed, and — when only RTTs
moved — those that steer by RTT (`dynamic`). The zone's digest is a sum over classes of
(the class's answer digest × the digest of its owners), modulo a prime, so a changed
class updates it in O(1); the RRsets are made only when a transfer or an export asks.
The indexes are built once per configuration.
"""

from __future__ import annotations

import hashlib
import ipaddress
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.CNAME
import dns.rrset
from dns.rdtypes.IN.A import A
from dns.rdtypes.IN.AAAA import AAAA
from dnslib import QTYPE

from dnsd.config.model import Config, Zone
from dnsd.config.pool_refs import nested_lb
from dnsd.geo.locate import NOWHERE
from dnsd.health.view import HealthView
from dnsd.snapshot import CompiledZone, Snapshot
from dnsd.steering import ClientInfo, SteeringInputs, steer
from dnsd.steering.records import CNAME, LbRecord, decision_records

NO_LOCATION = ClientInfo(address=ipaddress.IPv4Address(0), location=NOWHERE)
DRAW_SEED = 0  # the fixed random source of transferred answers
IN = dns.rdataclass.IN


@dataclass(frozen=True, slots=True)
class LbIndex:
    """Per configuration: each load balancer's class, the classes by the pools they can
    answer from, and the classes that steer by RTT (directly or through a nested one)."""

    classes: Mapping[str, int]
    by_pool: Mapping[str, frozenset[int]]
    by_rtt: frozenset[int]


@dataclass(frozen=True, slots=True)
class ViewChange:
    """What moved between two health views, as far as answers go."""

    pools: frozenset[str]  # a backend verdict, an override or a pool override changed
    rtt_pools: frozenset[str]  # only RTTs changed
    lbs: frozenset[str]  # a trickle override changed

    def classes(self, index: LbIndex) -> set[int]:
        dirty = {index.classes[lb] for lb in self.lbs if lb in index.classes}
        for pool in self.pools:
            dirty |= index.by_pool.get(pool, frozenset())
        for pool in self.rtt_pools:
            dirty |= index.by_pool.get(pool, frozenset()) & index.by_rtt
        return dirty


def view_change(old: HealthView, new: HealthView) -> ViewChange:
    """O(backends + overrides): never O(names)."""
    pools: set[str] = set()
    rtt_pools: set[str] = set()
    if old.backends is not new.backends:
        for key in old.backends.keys() | new.backends.keys():
            before, after = old.backends.get(key), new.backends.get(key)
            if (
                before is None
                or after is None
                or (before.healthy, before.probed, before.override)
                != (
                    after.healthy,
                    after.probed,
                    after.override,
                )
            ):
                pools.add(key[0])
            elif dict(before.rtt) != dict(after.rtt):
                rtt_pools.add(key[0])
    for name in old.pool_overrides.keys() | new.pool_overrides.keys():
        if old.pool_overrides.get(name) != new.pool_overrides.get(name):
            pools.add(name)
    lbs = {
        name
        for name in old.trickle_overrides.keys() | new.trickle_overrides.keys()
        if old.trickle_overrides.get(name) != new.trickle_overrides.get(name)
    }
    return ViewChange(frozenset(pools), frozenset(rtt_pools - pools), frozenset(lbs))


_INDEXES: dict[int, tuple[Config, LbIndex]] = {}
_ZONES: dict[int, tuple[Zone, tuple[LbIndex, ZoneIndex]]] = {}
_KEEP = 64
P = (1 << 255) - 19  # a prime: digests are combined modulo it


def lb_index(config: Config) -> LbIndex:
    hit = _INDEXES.get(id(config))
    if hit is not None and hit[0] is config:
        return hit[1]
    lbs = config.load_balancers
    kinds: dict[str, int] = {}
    classes = {
        name: kinds.setdefault(repr(replace(lb, name="")), len(kinds)) for name, lb in lbs.items()
    }

    def reach(name: str, seen: frozenset[str]) -> tuple[set[str], bool]:
        lb = lbs[name]
        pools: set[str] = set()
        rtt = lb.steering == "dynamic"
        for ref in {*lb.pool_refs(), *([lb.fallback_pool] if lb.fallback_pool else [])}:
            inner = nested_lb(ref)
            if inner is None:
                pools.add(ref)
            elif inner in lbs and inner not in seen:
                more, inner_rtt = reach(inner, seen | {inner})
                pools |= more
                rtt = rtt or inner_rtt
        return pools, rtt

    by_pool: dict[str, set[int]] = {}
    by_rtt: set[int] = set()
    done: set[int] = set()
    for name in lbs:
        kind = classes[name]
        if kind in done:  # alike but for the name: the same pools
            continue
        done.add(kind)
        pools, rtt = reach(name, frozenset({name}))
        for pool in pools:
            by_pool.setdefault(pool, set()).add(kind)
        if rtt:
            by_rtt.add(kind)
    index = LbIndex(
        MappingProxyType(classes),
        MappingProxyType({p: frozenset(k) for p, k in by_pool.items()}),
        frozenset(by_rtt),
    )
    _remember(_INDEXES, config, index)
    return index


@dataclass(frozen=True, slots=True)
class ZoneIndex:
    """Per zone configuration (and configuration): its load-balanced owners by load
    balancer, and per class the sum of its load balancers' owner digests and owner count."""

    owners: Mapping[str, tuple[str, ...]]
    weight: Mapping[str, int]  # load balancer → digest of its owners here
    class_weight: Mapping[int, int]
    class_owners: Mapping[int, int]
    class_lb: Mapping[int, str]  # one load balancer of the class (to steer with)


def zone_index(zone: Zone, index: LbIndex) -> ZoneIndex:
    hit = _ZONES.get(id(zone))
    if hit is not None and hit[0] is zone and hit[1][0] is index:
        return hit[1][1]
    table: dict[str, list[str]] = {}
    for owner, lb in zone.lb_names.items():
        table.setdefault(lb, []).append(owner)
    owners = {lb: tuple(sorted(o)) for lb, o in table.items()}
    weight = {lb: _digest(" ".join(o)) for lb, o in owners.items()}
    class_weight: dict[int, int] = {}
    class_owners: dict[int, int] = {}
    class_lb: dict[int, str] = {}
    for lb, o in owners.items():
        kind = index.classes[lb]
        class_weight[kind] = (class_weight.get(kind, 0) + weight[lb]) % P
        class_owners[kind] = class_owners.get(kind, 0) + len(o)
        class_lb.setdefault(kind, lb)
    made = ZoneIndex(owners, weight, class_weight, class_owners, class_lb)
    _remember(_ZONES, zone, (index, made))
    return made


def _remember(table: dict[int, Any], key: object, value: object) -> None:
    if len(table) >= _KEEP:
        table.pop(next(iter(table)))
    table[id(key)] = (key, value)


# What one load balancer answers a client with no location: its TTL, then its records (a
# CNAME, or its A and AAAA addresses). Load balancers of one class share one such tuple.
Answer = tuple[int, tuple[LbRecord, ...]]
# A class, and the trickle override its members have (a member with its own override
# decides apart from the others).
Group = tuple[int, float | None]


@dataclass(frozen=True)
class LbAnswers:
    """The answer of every group of load balancers in one zone, each class's share of the
    digest, and the RRsets made from them only when a transfer or an export asks."""

    by_group: Mapping[Group, Answer]
    shares: Mapping[int, tuple[int, int]]  # class → (its digest share, its records)
    view: HealthView  # the view they were made from
    zone: ZoneIndex
    lbs: LbIndex
    _rrsets: list[dns.rrset.RRset] = field(default_factory=list, compare=False)

    @property
    def total(self) -> int:
        return sum(share for share, _ in self.shares.values()) % P

    @property
    def digest(self) -> str:
        return f"{self.total:064x}"

    def answer(self, lb: str) -> Answer:
        return self.by_group[(self.lbs.classes[lb], self.view.trickle_overrides.get(lb))]

    def __iter__(self) -> Iterator[dns.rrset.RRset]:
        """The RRsets in DNS order (made once, when a transfer or an export asks)."""
        if not self._rrsets and self.zone.owners:
            made = [
                rrset
                for lb, owners in self.zone.owners.items()
                for owner in owners
                for rrset in rrsets_of(owner, self.answer(lb))
            ]
            made.sort(key=lambda r: (r.name, r.rdtype))
            self._rrsets.extend(made)
        yield from self._rrsets

    def __len__(self) -> int:
        return sum(records for _, records in self.shares.values())

    @classmethod
    def compute(cls, snap: Snapshot, view: HealthView, zone: CompiledZone, now: float) -> LbAnswers:
        lbs = lb_index(snap.config)
        zi = zone_index(zone.config, lbs)
        return cls({}, {}, view, zi, lbs)._with(snap, view, now, set(zi.class_lb))

    def updated(
        self, snap: Snapshot, view: HealthView, zone: CompiledZone, now: float
    ) -> LbAnswers:
        """The answers at `view`: only the classes the change can touch are steered again."""
        dirty = view_change(self.view, view).classes(self.lbs) & self.zone.class_lb.keys()
        if not dirty:
            return replace(self, view=view)
        return self._with(snap, view, now, dirty)

    def _with(self, snap: Snapshot, view: HealthView, now: float, dirty: set[int]) -> LbAnswers:
        zi, classes = self.zone, self.lbs.classes
        by_group = {g: a for g, a in self.by_group.items() if g[0] not in dirty}
        shares = {k: v for k, v in self.shares.items() if k not in dirty}
        # Members with their own trickle override: O(overrides), not O(members).
        apart: dict[int, dict[float, tuple[int, int, str]]] = {}
        for lb, ratio in view.trickle_overrides.items():
            kind = classes.get(lb)
            if kind in dirty and lb in zi.weight:
                weight, count, _ = apart.setdefault(kind, {}).get(ratio, (0, 0, lb))
                apart[kind][ratio] = ((weight + zi.weight[lb]) % P, count + len(zi.owners[lb]), lb)
        answers: dict[Answer, int] = {}  # answer → its digest, made once per view
        for kind in dirty:
            groups = apart.get(kind, {})
            rest_weight = zi.class_weight[kind] - sum(w for w, _, _ in groups.values())
            rest_count = zi.class_owners[kind] - sum(c for _, c, _ in groups.values())
            members: list[tuple[float | None, int, int, str]] = [
                (r, w, c, lb) for r, (w, c, lb) in groups.items()
            ]
            if rest_count:
                members.append((None, rest_weight % P, rest_count, self._plain(kind, view)))
            share, records = 0, 0
            for own_ratio, weight, count, member in members:
                answer = decide(snap, view, member, now)
                by_group[(kind, own_ratio)] = answer
                h = answers.get(answer)
                if h is None:
                    h = answers[answer] = _digest(repr(_digest_form(answer)))
                share = (share + h * weight) % P
                records += count * _records(answer)
            shares[kind] = (share, records)
        return LbAnswers(by_group, shares, view, zi, self.lbs)

    def _plain(self, kind: int, view: HealthView) -> str:
        """A member of the class without a trickle override of its own (rarely a search)."""
        lb = self.zone.class_lb[kind]
        if lb not in view.trickle_overrides:
            return lb
        return next(
            name
            for name in self.zone.owners
            if self.lbs.classes[name] == kind and name not in view.trickle_overrides
        )


def decide(snap: Snapshot, view: HealthView, lb_name: str, now: float) -> Answer:
    """The full answer path's decision (`steer`) for a client with no location, with a
    fixed random source: the same health gives the same content. Its records are the A
    query's then the AAAA query's (`decision_records`); a CNAME answers for the name
    alone."""
    lb = snap.config.load_balancers[lb_name]
    records: list[LbRecord] = []
    ttl = 0
    for qtype in (QTYPE.A, QTYPE.AAAA):
        inputs = SteeringInputs(snap, view, NO_LOCATION, random.Random(DRAW_SEED), now)
        answer = steer(inputs, lb, qtype).answer
        assert answer is not None  # a walk's explanation carries its decision
        ttl = answer.ttl
        made = decision_records(answer, qtype)
        if made and made[0].rtype == CNAME:
            return (ttl, made)
        records.extend(made)
    return (ttl, tuple(records))


def rrsets_of(owner: str, answer: Answer) -> list[dns.rrset.RRset]:
    """The answer's records as dnspython RRsets, one per type."""
    ttl, records = answer
    name = dns.name.from_text(owner)
    by_type: dict[int, list[dns.rdata.Rdata]] = {}
    for record in records:
        by_type.setdefault(record.rtype, []).append(_rdata(record))
    return [dns.rrset.from_rdata_list(name, ttl, rdatas) for rdatas in by_type.values()]


def _rdata(record: LbRecord) -> dns.rdata.Rdata:
    if record.rtype == CNAME:
        target = dns.name.from_text(record.value)
        return dns.rdtypes.ANY.CNAME.CNAME(IN, dns.rdatatype.CNAME, target)
    kind = AAAA if record.rtype == dns.rdatatype.AAAA else A
    return kind(IN, record.rtype, record.value)


def _digest_form(answer: Answer) -> tuple[int, str | None, tuple[str, ...], tuple[str, ...]]:
    """(TTL, CNAME target or None, A addresses, AAAA addresses): what an answer's share of
    the zone digest is the hash of (digests stay those of earlier versions)."""
    ttl, records = answer
    cname = next((r.value for r in records if r.rtype == CNAME), None)
    v4 = tuple(r.value for r in records if r.rtype == dns.rdatatype.A)
    v6 = tuple(r.value for r in records if r.rtype == dns.rdatatype.AAAA)
    return (ttl, cname, v4, v6)


def _records(answer: Answer) -> int:
    return len(answer[1])


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest(), "big") % P
