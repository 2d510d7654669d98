"""Client location: address → country / subdivision → one of the 13 regions (steering.md §4).

Private, loopback, link-local, multicast and reserved addresses skip the database. When
nothing is known, the node's `pop_region` stands in (the source system locates a client
by the data centre that answers it), else there is no region and default pools apply.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

from dnsd.geo.database import CONTINENT_REGIONS, GeoDatabase
from dnsd.geo.regions import RegionTable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Location:
    country: str | None = None
    subdivision: str | None = None
    region: str | None = None
    latitude: float | None = None
    longitude: float | None = None
    source: Literal["geoip", "pop_region", "none"] = "none"
    prefix_len: int | None = None  # database network that decided, for the ECS scope


NOWHERE = Location()


def normalise(address: IPAddress) -> IPAddress:
    """IPv4-mapped IPv6 (::ffff:a.b.c.d) → the IPv4 address, so databases find it."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def skips_lookup(address: IPAddress) -> bool:
    return (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )


def locate(
    address: IPAddress, db: GeoDatabase | None, table: RegionTable, pop_region: str | None
) -> Location:
    address = normalise(address)
    record = None if db is None or skips_lookup(address) else db.lookup(address)
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
