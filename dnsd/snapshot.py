"""The compiled, immutable configuration a query is answered from, and its holder.

`compile_snapshot` turns a validated Config into name indexes once per load, so the
per-query path only does dictionary look-ups. `SnapshotHolder.swap` replaces the one
reference the serving path reads; nothing published is ever mutated.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from dnslib import QTYPE, RR

from dnsd.config.model import Config, LoadBalancer, RRset, Zone
from dnsd.config.zone_section import soa_record
from dnsd.errors import Reason

if TYPE_CHECKING:
    from dnsd.geo.database import GeoDatabase

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class NodeSettings:
    """Who this server is: its name (the PoP for `pop_pools`) and its region."""

    name: str | None = None
    pop_region: str | None = None


@dataclass(frozen=True, slots=True)
class Node:
    """Everything at one owner name. An empty node is an empty non-terminal (RFC 8020)."""

    rrsets: Mapping[int, RRset]
    lb: LoadBalancer | None = None


@dataclass(frozen=True, slots=True)
class CompiledZone:
    name: str
    nodes: Mapping[str, Node]  # every owner, plus empty non-terminals, plus the apex
    cuts: frozenset[str]  # delegation points (names below the apex with NS records)
    soa: RR
    negative_ttl: int  # min(SOA TTL, SOA minimum), RFC 2308
    label_count: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    generation: int
    config: Config
    zones: Mapping[str, CompiledZone]
    max_zone_labels: int
    warnings: tuple[Reason, ...] = ()
    source: str = ""
    loaded_at: float = field(default=0.0)
    geo: GeoDatabase | None = None
    node: NodeSettings = field(default_factory=NodeSettings)
    zone_regions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    client_zones: tuple[tuple[IPNetwork, str], ...] = ()  # longest prefix first

    def client_zone(
        self, address: ipaddress.IPv4Address | ipaddress.IPv6Address
    ) -> tuple[str | None, int | None]:
        """client_zones: the zone of the longest matching subnet, with its prefix length."""
        for network, zone in self.client_zones:
            if address.version == network.version and address in network:
                return zone, network.prefixlen
        return None, None


def label_count(name: str) -> int:
    return 0 if name == "." else name.rstrip(".").count(".") + 1


def compile_zone(zone: Zone, lbs: Mapping[str, LoadBalancer]) -> CompiledZone:
    by_owner: dict[str, dict[int, RRset]] = {}
    soa = soa_record(zone)
    by_owner.setdefault(zone.name, {})[QTYPE.SOA] = RRset(
        zone.name, QTYPE.SOA, zone.soa.ttl, (soa,)
    )
    for rrset in zone.rrsets:
        by_owner.setdefault(rrset.owner, {})[rrset.rtype] = rrset
    for owner in zone.lb_names:
        by_owner.setdefault(owner, {})
    # Empty non-terminals: every ancestor between an owner and the apex exists.
    for owner in list(by_owner):
        name = owner
        while name != zone.name:
            name = name.split(".", 1)[1] or "."
            by_owner.setdefault(name, {})
    nodes = {
        owner: Node(MappingProxyType(sets), lbs.get(zone.lb_names.get(owner, "")))
        for owner, sets in by_owner.items()
    }
    cuts = frozenset(
        owner for owner, sets in by_owner.items() if owner != zone.name and QTYPE.NS in sets
    )
    return CompiledZone(
        name=zone.name,
        nodes=MappingProxyType(nodes),
        cuts=cuts,
        soa=soa,
        negative_ttl=min(zone.soa.ttl, zone.soa.minimum),
        label_count=label_count(zone.name),
    )


def compile_snapshot(
    config: Config,
    generation: int,
    warnings: list[Reason] | None = None,
    source: str = "",
    loaded_at: float = 0.0,
    geo: GeoDatabase | None = None,
    node: NodeSettings | None = None,
) -> Snapshot:
    zones = {z.name: compile_zone(z, config.load_balancers) for z in config.zones}
    # zonal-affinity.md §1: a zone belongs to the region of the pools whose backends are in it.
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
        warnings=tuple(warnings or ()),
        source=source,
        loaded_at=loaded_at,
        geo=geo,
        node=node or NodeSettings(),
        zone_regions=MappingProxyType(zone_regions),
        client_zones=tuple(client_zones),
    )


class SnapshotHolder:
    """Holds the snapshot being served. Read `current` once per query; `swap` to publish."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.current = snapshot

    def swap(self, snapshot: Snapshot) -> Snapshot:
        old, self.current = self.current, snapshot
        return old
