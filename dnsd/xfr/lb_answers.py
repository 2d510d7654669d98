"""A zone's load-balanced answers as transferred, kept so that a new health view costs
O(what it changes), not O(names) (every health event re-steered every name).

Load balancers configured alike but for their name decide alike: they form a *class*, and
a class is steered once per view, and only the classes a health change reaches
(dnsd.config.lb_graph, `LbGraph.reached`) are steered again. The zone's digest is a sum
over classes of (the class's answer digest × the digest of its owners), modulo a prime,
so a changed class updates it in O(1); the RRsets are made only when a transfer or an
export asks. The per-zone index is kept with the compiled zone.
"""

from __future__ import annotations

import hashlib
import ipaddress
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.CNAME
import dns.rrset
from dns.rdtypes.IN.A import A
from dns.rdtypes.IN.AAAA import AAAA

from dnsd.config.lb_graph import LbGraph, compile_lb_graph
from dnsd.config.model import Config, Zone
from dnsd.derived import CARRIED
from dnsd.geo.locate import NOWHERE
from dnsd.health.view import HealthView, change_between
from dnsd.snapshot import CompiledZone, Snapshot
from dnsd.steering import ClientInfo, SteeringInputs, steer
from dnsd.steering.records import CNAME, LbRecord, decision_records

NO_LOCATION = ClientInfo(address=ipaddress.IPv4Address(0), location=NOWHERE)
DRAW_SEED = 0  # the fixed random source of transferred answers
IN = dns.rdataclass.IN


def lb_index(source: Config | Snapshot) -> LbGraph:
    """The LB graph of a snapshot (compiled with it), or made now from a bare config (the
    classes dnsd.lb_classes shares answers by)."""
    return source.lb_graph if isinstance(source, Snapshot) else compile_lb_graph(source)


P = (1 << 255) - 19  # a prime: digests are combined modulo it
ZONE_INDEX = CARRIED + "xfr zone index"


@dataclass(frozen=True, slots=True)
class ZoneIndex:
    """Per zone configuration (and configuration): its load-balanced owners by load
    balancer, and per class the sum of its load balancers' owner digests and owner count."""

    owners: Mapping[str, tuple[str, ...]]
    weight: Mapping[str, int]  # load balancer → digest of its owners here
    class_weight: Mapping[int, int]
    class_owners: Mapping[int, int]
    class_lb: Mapping[int, str]  # one load balancer of the class (to steer with)


def zone_index(zone: CompiledZone, graph: LbGraph) -> ZoneIndex:
    """Kept with the compiled zone (and carried to its successors of the same zone
    configuration) while the graph is the same."""
    made: tuple[LbGraph, ZoneIndex] | None = zone.derived.peek(ZONE_INDEX)
    if made is None or made[0] is not graph:  # made outside the lock: O(names)
        made = (graph, _zone_index(zone.config, graph))
        zone.derived.put(ZONE_INDEX, made)
    return made[1]


def _zone_index(zone: Zone, index: LbGraph) -> ZoneIndex:
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
    return ZoneIndex(owners, weight, class_weight, class_owners, class_lb)


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
    lbs: LbGraph
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
        lbs = snap.lb_graph
        zi = zone_index(zone, lbs)
        return cls({}, {}, view, zi, lbs)._with(snap, view, now, set(zi.class_lb))

    def updated(
        self, snap: Snapshot, view: HealthView, zone: CompiledZone, now: float
    ) -> LbAnswers:
        """The answers at `view`: only the classes the change can touch are steered again."""
        change = change_between(self.view, view)
        dirty = self.lbs.reached_classes(change.pools, change.rtt_pools, change.lbs)
        dirty &= self.zone.class_lb.keys()
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
    for qtype in (1, 28):  # A, AAAA
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
