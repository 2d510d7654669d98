"""Client location: address → country / subdivision → one of the 13 regions (docs/steering.md, locating the client).

In order: the operator's `client_networks` (longest prefix), then the geo database — asked
about every address, private and documentation ranges included, since a user's own
MaxMind-format database may map internal networks — then the node's `pop_region` (the
source system locates a client by the data centre that answers it), else no region and
default pools apply.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from dnsd.geo.database import CONTINENT_REGIONS, GeoDatabase
from dnsd.geo.regions import RegionTable

if TYPE_CHECKING:
    from dnsd.geo.networks import NetworkTable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
LocationSource = Literal["client_networks", "geoip", "pop_region", "pop", "none"]


@dataclass(frozen=True, slots=True)
class Location:
    country: str | None = None
    subdivision: str | None = None
    region: str | None = None
    latitude: float | None = None
    longitude: float | None = None
    source: LocationSource = "none"
    prefix_len: int | None = None  # network that decided (client_networks or database): ECS scope
    network: str | None = None  # the client_networks entry that matched, for `explain`


NOWHERE = Location()


def normalise(address: IPAddress) -> IPAddress:
    """IPv4-mapped IPv6 (::ffff:a.b.c.d) → the IPv4 address, so databases find it."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def locate(
    address: IPAddress,
    db: GeoDatabase | None,
    table: RegionTable,
    pop_region: str | None,
    networks: NetworkTable | None = None,
) -> Location:
    address = normalise(address)
    placed = networks.match(address) if networks is not None else None
    if placed is not None:
        return Location(
            country=placed.country,
            region=placed.region,
            source="client_networks",
            prefix_len=placed.network.prefixlen,
            network=str(placed.network),
        )
    record = None if db is None else db.lookup(address)
    if record is not None:
        region = table.region_of(record.country, record.subdivision)
        if region is None and record.country is None and record.continent:
            region = CONTINENT_REGIONS.get(record.continent)
        if region is not None:
            return Location(
                country=record.country,
                subdivision=record.subdivision,
                region=region,
                latitude=record.latitude,
                longitude=record.longitude,
                source="geoip",
                prefix_len=record.prefix_len,
            )
    if pop_region:
        return Location(region=pop_region, source="pop_region")
    return NOWHERE
