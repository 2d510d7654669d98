"""What steering knows about the client: the locating address, its location and zone."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, replace
from typing import Protocol

from dnsd.geo.ecs import ClientSubnet
from dnsd.geo.locate import NOWHERE, Location, locate, normalise
from dnsd.geo.regions import region_table
from dnsd.snapshot import Snapshot

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class ClientInfo:
    address: IPAddress  # ECS network address when ECS decided, else the source address
    ecs_prefix: int | None = None  # ECS SOURCE PREFIX-LENGTH when ECS was used
    location: Location = NOWHERE
    zone: str | None = None  # from client_zones (zonal affinity)
    zone_prefix: int | None = None  # the client_zones subnet that matched
    pop: str | None = None  # this node's PoP name (pop_pools)

    @property
    def max_prefix(self) -> int:
        return self.ecs_prefix if self.ecs_prefix is not None else self.address.max_prefixlen

    @property
    def version(self) -> int:
        return self.address.version

    def placed(self, location: Location) -> ClientInfo:
        """The same client placed at `location` (client_region: pop)."""
        return replace(self, location=location)

    @property
    def subnet(self) -> bytes:
        """The client's /24 (IPv4) or /56 (IPv6) network address, for sticky `hash`
        selection (byte slicing: this runs per query)."""
        packed = self.address.packed
        return packed[:3] + b"\x00" if len(packed) == 4 else packed[:7] + bytes(9)

    def subnet_key(self) -> bytes:
        return self.subnet


class LocationView(Protocol):
    """What steering reads of a location (`Location`, or a plan's `SeenLocation`)."""

    @property
    def region(self) -> str | None: ...
    @property
    def country(self) -> str | None: ...
    @property
    def subdivision(self) -> str | None: ...
    @property
    def latitude(self) -> float | None: ...
    @property
    def longitude(self) -> float | None: ...
    @property
    def prefix_len(self) -> int | None: ...


class ClientView(Protocol):
    """What steering reads of the client (`ClientInfo`, or a plan's `SeenClient`, which
    notes each field read: dnsd/steering/plan_key.py)."""

    @property
    def location(self) -> LocationView: ...
    @property
    def zone(self) -> str | None: ...
    @property
    def zone_prefix(self) -> int | None: ...
    @property
    def pop(self) -> str | None: ...
    @property
    def max_prefix(self) -> int: ...
    @property
    def version(self) -> int: ...
    def subnet_key(self) -> bytes: ...
    def placed(self, location: Location) -> ClientView: ...


def locating_address(source: IPAddress, ecs: ClientSubnet | None) -> tuple[IPAddress, int | None]:
    """Which address locates the client, and the ECS prefix it came with: the Client Subnet
    network when the resolver sent one with a non-zero SOURCE PREFIX-LENGTH (RFC 7871
    §7.1.2: /0 means "do not use my address"), else the packet's source address."""
    if ecs is not None and ecs.source_prefix > 0:
        return ecs.address, ecs.source_prefix
    return source, None


def steered_type(qtype: int) -> int:
    """The record type a load-balanced name answers with: ANY is answered as A."""
    return 1 if qtype == 255 else qtype


def client_info(snap: Snapshot, address: IPAddress, ecs_prefix: int | None) -> ClientInfo:
    """Locate the client: `address` is the ECS network address when ECS applies."""
    address = normalise(address)
    location = locate(address, snap.geo, region_table(), snap.node.pop_region, snap.client_networks)
    zone, zone_prefix = snap.client_zone(address)
    return ClientInfo(
        address=address,
        ecs_prefix=ecs_prefix,
        location=location,
        zone=zone,
        zone_prefix=zone_prefix,
        pop=snap.node.name,
    )
