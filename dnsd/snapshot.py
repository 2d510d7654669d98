"""The compiled, immutable configuration a query is answered from, and its holder.

`compile_snapshot` turns a validated Config into name indexes once per load, so the
per-query path only does dictionary look-ups. `SnapshotHolder.swap` replaces the one
reference the serving path reads; nothing published is ever mutated.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from dnslib import QTYPE, RR, SOA

from dnsd.config.lb_graph import LbGraph, compile_lb_graph
from dnsd.config.model import Config, LoadBalancer, RRset, Zone
from dnsd.config.zone_section import soa_record
from dnsd.cookies import ServerCookies
from dnsd.derived import Derived
from dnsd.dnsname import labels, parent
from dnsd.errors import Reason
from dnsd.geo.networks import NetworkTable
from dnsd.rdata import TYPE_DNAME, TYPE_NS, target
from dnsd.tsig_keyring import Keyring, keyring
from dnsd.zone_keys import ZoneKeys

if TYPE_CHECKING:
    from dnsd.geo.database import GeoDatabase

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
LOCAL_SOURCE = "local"  # probe source of a node without a pop_region

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class NodeSettings:
    """Who this server is: its name (the PoP for `pop_pools`) and its region."""

    name: str | None = None
    pop_region: str | None = None
    cookies: ServerCookies | None = None  # DNS cookies (RFC 7873); None: not answered

    @property
    def probe_source(self) -> str:
        """The source this node's own probes record under: its region, else `local`. Its RTT
        profiles are the answering node's own vantage point (docs/steering.md, dynamic)."""
        return self.pop_region or LOCAL_SOURCE


class RRsets(Mapping[int, RRset]):
    """One name's RRsets by type: the RRset itself when there is one (most names), else a
    tuple scanned in order. Not a dict: a name holds a few types, and a dict per name costs
    ~200 bytes more across every name of a big zone. Empty non-terminals and
    load-balanced names share `NO_RRSETS`."""

    __slots__ = ("_sets",)

    def __init__(self, sets: Iterable[RRset] = ()) -> None:
        found = tuple(sets)
        self._sets: RRset | tuple[RRset, ...] = found[0] if len(found) == 1 else found

    def _all(self) -> tuple[RRset, ...]:
        sets = self._sets
        return sets if isinstance(sets, tuple) else (sets,)

    def get(self, rtype: int, default: Any = None) -> Any:
        sets = self._sets
        if sets.__class__ is RRset:
            return sets if sets.rtype == rtype else default
        for rrset in sets:  # type: ignore[union-attr]
            if rrset.rtype == rtype:
                return rrset
        return default

    def __getitem__(self, rtype: int) -> RRset:
        found = self.get(rtype)
        if found is None:
            raise KeyError(rtype)
        return found

    def __contains__(self, rtype: object) -> bool:
        sets = self._sets
        if sets.__class__ is RRset:  # most names: one set, no generator
            return sets.rtype == rtype
        return any(rrset.rtype == rtype for rrset in sets)  # type: ignore[union-attr]

    def __iter__(self) -> Iterator[int]:
        return (rrset.rtype for rrset in self._all())

    def __len__(self) -> int:
        return len(self._all())

    # Written out, not Mapping's views (a lookup per key): a zone's transfer digest and
    # its answer tables read every name's sets.
    def keys(self) -> list[int]:  # type: ignore[override]
        return [rrset.rtype for rrset in self._all()]

    def values(self) -> tuple[RRset, ...]:  # type: ignore[override]
        return self._all()

    def items(self) -> list[tuple[int, RRset]]:  # type: ignore[override]
        return [(rrset.rtype, rrset) for rrset in self._all()]

    def __repr__(self) -> str:
        return f"RRsets({list(self._all())!r})"


NO_RRSETS = RRsets()


def with_rrset(sets: Mapping[int, RRset], rrset: RRset) -> RRsets:
    """`sets` with `rrset` added, or in place of the one of its type."""
    return RRsets([*(s for s in sets.values() if s.rtype != rrset.rtype), rrset])


class Node(RRsets):
    """Everything at one owner name: its RRsets (the node is their mapping itself: one
    object per name, 40 bytes fewer across every name of a big zone) and its load
    balancer. An empty node is an empty non-terminal (RFC 8020). Never mutated."""

    __slots__ = ("lb",)

    def __init__(self, rrsets: Mapping[int, RRset] = NO_RRSETS, lb: LoadBalancer | None = None):
        if isinstance(rrsets, RRsets):
            self._sets = rrsets._sets
        else:
            RRsets.__init__(self, rrsets.values())
        self.lb = lb

    @property
    def rrsets(self) -> Mapping[int, RRset]:
        return self

    def with_lb(self, lb: LoadBalancer | None) -> Node:
        return Node(self, lb)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Node):
            return NotImplemented
        return self.lb == other.lb and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Node({list(self._all())!r}, lb={self.lb and self.lb.name!r})"


class WithApex(Mapping[str, Node]):
    """A zone's nodes with another apex node (new SOA serials, the signing keys): the
    names of the zone it is made from, shared, and its own apex — not a copy of the
    mapping (3.7 MiB per 100,000 names, kept twice: the snapshot also holds the zone as
    compiled, for the next reload to reuse)."""

    __slots__ = ("_apex", "_base", "_node")
    _base: Mapping[str, Node]

    def __init__(self, base: Mapping[str, Node], apex: str, node: Node) -> None:
        if isinstance(base, WithApex):  # the apex replaced again: one level only
            base = base._base
        self._base, self._apex, self._node = base, apex, node

    def __getitem__(self, name: str) -> Node:
        return self._node if name == self._apex else self._base[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self._node if name == self._apex else self._base.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name == self._apex or name in self._base

    def __iter__(self) -> Iterator[str]:
        return iter(self._base)

    def __len__(self) -> int:
        return len(self._base)

    def items(self) -> Iterator[tuple[str, Node]]:  # type: ignore[override]
        apex, node = self._apex, self._node
        return ((name, node if name == apex else held) for name, held in self._base.items())

    def values(self) -> Iterator[Node]:  # type: ignore[override]
        return (held for _, held in self.items())

    def copy(self) -> dict[str, Node]:
        out = copied(self._base)
        out[self._apex] = self._node
        return out


@dataclass(frozen=True, slots=True)
class CompiledZone:
    name: str
    nodes: Mapping[str, Node]  # every owner, plus empty non-terminals, plus the apex
    cuts: frozenset[str]  # delegation points (names below the apex with NS records)
    soa: RR
    negative_ttl: int  # min(SOA TTL, SOA minimum), RFC 2308
    label_count: int
    config: Zone  # as configured: transfer ACL, notify targets, serial rule
    dnames: Mapping[str, str] = field(default_factory=dict)  # DNAME owner → target (RFC 6672)
    # What consumers build from this zone (dnsd.zone_tables: its answer tables); a new
    # zone object (a changed file, new serials) starts empty.
    derived: Derived = field(init=False, default_factory=Derived, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Snapshot:
    generation: int
    config: Config
    zones: Mapping[str, CompiledZone]
    max_zone_labels: int
    lb_graph: LbGraph  # what each load balancer reaches (dnsd.config.lb_graph)
    warnings: tuple[Reason, ...] = ()
    source: str = ""
    loaded_at: float = field(default=0.0)
    geo: GeoDatabase | None = None
    node: NodeSettings = field(default_factory=NodeSettings)
    zone_regions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    client_zones: tuple[tuple[IPNetwork, str], ...] = ()  # longest prefix first
    client_networks: NetworkTable | None = (
        None  # docs/steering.md, locating the client, before the geo database
    )
    tsig_keyring: Keyring = field(default_factory=lambda: MappingProxyType({}))
    signing: Mapping[str, ZoneKeys] = field(default_factory=lambda: MappingProxyType({}))
    # The zones as compiled from the config, before serials and keys: what the next
    # reload reuses for zones whose file did not change.
    compiled: Mapping[str, CompiledZone] = field(default_factory=lambda: MappingProxyType({}))
    # What consumers build from this snapshot (dnsd.zone_tables: every zone's answer
    # tables merged); a new snapshot object starts empty.
    derived: Derived = field(init=False, default_factory=Derived, compare=False, repr=False)

    def client_zone(
        self, address: ipaddress.IPv4Address | ipaddress.IPv6Address
    ) -> tuple[str | None, int | None]:
        """client_zones: the zone of the longest matching subnet, with its prefix length."""
        for network, zone in self.client_zones:
            if address.version == network.version and address in network:
                return zone, network.prefixlen
        return None, None


def _relinked(compiled: CompiledZone, lbs: Mapping[str, LoadBalancer]) -> CompiledZone:
    names = compiled.config.lb_names if compiled.config is not None else {}
    changed = {
        owner: compiled.nodes[owner].with_lb(lbs.get(lb))
        for owner, lb in names.items()
        if compiled.nodes[owner].lb is not lbs.get(lb)
    }
    if not changed:
        return compiled
    nodes = copied(compiled.nodes)
    nodes.update(changed)
    relinked = replace(compiled, nodes=MappingProxyType(nodes))
    relinked.derived.carry(compiled.derived)
    return relinked


def _node(held: RRset | list[RRset] | None, lb: LoadBalancer | None) -> Node:
    if held is None:
        return Node(NO_RRSETS, lb)
    if isinstance(held, list):  # one per type: the last written wins
        return Node({rrset.rtype: rrset for rrset in held}, lb)
    node = Node(NO_RRSETS, lb)
    node._sets = held  # no RRsets object made only to be copied from
    return node


def label_count(name: str) -> int:
    return len(labels(name))


def compile_zone(
    zone: Zone, lbs: Mapping[str, LoadBalancer], previous: CompiledZone | None = None
) -> CompiledZone:
    """The zone's lookup tree. `previous`: the same Zone object compiled before (a reload
    where the zone's file did not change): its tree is reused and only the names whose
    load balancer changed get a new node."""
    if previous is not None and previous.config is zone:
        return _relinked(previous, lbs)
    # Owner → its RRset, or a list once it has several: no container per name while the
    # tree is built, since 100,000s of short-lived ones would leave the process's memory
    # fragmented around the objects that stay.
    by_owner: dict[str, RRset | list[RRset] | None] = {}
    soa = soa_record(zone)
    by_owner[zone.name] = RRset(zone.name, QTYPE.SOA, zone.soa.ttl, (soa.rdata,))
    for rrset in zone.rrsets:
        held = by_owner.get(rrset.owner)
        if held is None:
            by_owner[rrset.owner] = rrset
        elif isinstance(held, list):
            held.append(rrset)
        else:
            by_owner[rrset.owner] = [held, rrset]
    for owner in zone.lb_names:
        by_owner.setdefault(owner, None)
    # Empty non-terminals: every ancestor between an owner and the apex exists.
    for owner in list(by_owner):
        name = owner
        while name != zone.name:
            name = parent(name)
            by_owner.setdefault(name, None)
    nodes = {
        owner: _node(held, lbs.get(zone.lb_names.get(owner, "")))
        for owner, held in by_owner.items()
    }
    found_cuts: list[str] = []
    dnames: dict[str, str] = {}
    for owner, node in nodes.items():  # one pass, by `get`: a million names take seconds
        if node.get(TYPE_NS) is not None and owner != zone.name:
            found_cuts.append(owner)
        dname = node.get(TYPE_DNAME)
        if dname is not None:
            dnames[owner] = target(TYPE_DNAME, dname.rdatas[0]) or "."
    cuts = frozenset(found_cuts)
    return CompiledZone(
        name=zone.name,
        nodes=MappingProxyType(nodes),
        cuts=cuts,
        soa=soa,
        negative_ttl=min(zone.soa.ttl, zone.soa.minimum),
        label_count=label_count(zone.name),
        config=zone,
        dnames=MappingProxyType(dnames),
    )


def compile_snapshot(
    config: Config,
    generation: int,
    warnings: list[Reason] | None = None,
    source: str = "",
    loaded_at: float = 0.0,
    geo: GeoDatabase | None = None,
    node: NodeSettings | None = None,
    previous: Snapshot | None = None,
) -> Snapshot:
    """`previous`: the snapshot this one replaces; zones whose configuration is the same
    object (their file did not change, dnsd.config.loader.ParseCache) reuse its trees."""
    old = previous.compiled if previous is not None else {}
    zones = {z.name: compile_zone(z, config.load_balancers, old.get(z.name)) for z in config.zones}
    # docs/steering.md, zonal affinity: a zone belongs to the region of the pools whose backends are in it.
    zone_regions = {
        b.zone: pool.region
        for pool in config.pools.values()
        if pool.region
        for b in pool.backends
        if b.zone
    }
    client_zones = sorted(
        ((cz.network, cz.zone) for cz in config.client_zones), key=lambda item: -item[0].prefixlen
    )
    return Snapshot(
        generation=generation,
        config=config,
        zones=MappingProxyType(zones),
        max_zone_labels=max((z.label_count for z in zones.values()), default=0),
        lb_graph=compile_lb_graph(config),
        warnings=tuple(warnings or ()),
        source=source,
        loaded_at=loaded_at,
        geo=geo,
        node=node or NodeSettings(),
        zone_regions=MappingProxyType(zone_regions),
        client_zones=tuple(client_zones),
        client_networks=NetworkTable(config.client_networks) if config.client_networks else None,
        tsig_keyring=MappingProxyType(keyring(config.tsig_keys)),
        compiled=MappingProxyType(zones),
    )


# A zone `with_serials` made: (what was derived from the zone it replaces, the old SOA
# RDATA, the new one). Consumers take it (dnsd.zone_tables patches its tables).
SERIAL_CHANGED = "serial changed"


def with_serials(snap: Snapshot, serials: Mapping[str, int]) -> Snapshot:
    """The same snapshot serving other SOA serials (dnsd.xfr.versions decides them): a new
    object when any serial differs (so the answer cache starts afresh), else `snap`."""
    zones = copied(snap.zones)
    changed = False
    for name, serial in serials.items():
        zone = zones.get(name)
        if zone is None or zone.soa.rdata.times[0] == serial:
            continue
        changed = True
        old = zone.soa.rdata
        soa = RR(
            zone.soa.rname,
            QTYPE.SOA,
            ttl=zone.soa.ttl,
            rdata=SOA(old.mname, old.rname, (serial, *old.times[1:])),
        )
        apex = zone.nodes[zone.name]
        was = apex.rrsets[QTYPE.SOA]
        sets = with_rrset(apex.rrsets, RRset(was.owner, was.rtype, was.ttl, (soa.rdata,)))
        nodes = WithApex(zone.nodes, zone.name, Node(sets, apex.lb))
        zones[name] = replace(zone, soa=soa, nodes=nodes)
        # What consumers made from the zone, for them to reuse: only the SOA changed.
        zones[name].derived.put(SERIAL_CHANGED, (zone.derived, old, soa.rdata))
        zones[name].derived.carry(zone.derived)
    return replace(snap, zones=MappingProxyType(zones)) if changed else snap


def copied(mapping: Mapping[K, V]) -> dict[K, V]:
    """A dict copy at C speed: dict() over a mapping proxy goes key by key through the
    mapping protocol (0.1 s for a zone of 100,000 names, on the event loop in a reload)."""
    if isinstance(mapping, (dict, MappingProxyType, WithApex)):
        return mapping.copy()
    return dict(mapping)


class SnapshotHolder:
    """Holds the snapshot being served. Read `current` once per query; `swap` to publish."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.current = snapshot

    def swap(self, snapshot: Snapshot) -> Snapshot:
        old, self.current = self.current, snapshot
        return old
