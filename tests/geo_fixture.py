"""A tiny MaxMind City database written by the tests (mmdb-writer), never committed."""

from __future__ import annotations

from pathlib import Path

from mmdb_writer import MmdbF64, MmdbU16, MMDBWriter
from netaddr import IPSet

# network → (country, subdivision (or a tuple of them), latitude, longitude)
FIXTURE = {
    "81.2.69.0/24": ("GB", None, 51.5, -0.1),  # WEU
    "202.12.27.0/24": ("JP", None, 35.7, 139.7),  # NEAS
    "91.198.0.0/16": ("DE", None, 50.1, 8.7),  # country mapping; a /16 network
    "8.8.8.0/24": ("US", "CA", 37.4, -122.1),  # WNAM by subdivision
    "9.9.9.0/24": ("US", None, 37.751, -97.822),  # US without subdivision: ENAM default
    "2a00:1450::/32": ("IE", None, 53.3, -6.3),  # WEU over IPv6
}


# A user's own database for internal and documentation ranges (the enterprise DR case).
PRIVATE_FIXTURE = {
    "10.0.0.0/8": ("JP", None, 35.7, 139.7),  # NEAS
    "192.0.2.0/24": ("DE", None, 50.1, 8.7),  # country DE
}


def write_city_db(path: Path, networks: dict | None = None) -> Path:
    writer = MMDBWriter(
        ip_version=6, ipv4_compatible=True, database_type="GeoLite2-City", languages=["en"],
        description={"en": "dnsd test fixture"},
    )  # fmt: skip
    for network, (country, subdivision, lat, lon) in (networks or FIXTURE).items():
        record: dict = {
            "country": {"iso_code": country},
            "location": {
                "latitude": MmdbF64(lat),
                "longitude": MmdbF64(lon),
                "accuracy_radius": MmdbU16(50),
            },
        }
        if subdivision:  # a code, or the codes from the largest down (Italy: region, province)
            codes = subdivision if isinstance(subdivision, tuple) else (subdivision,)
            record["subdivisions"] = [{"iso_code": code} for code in codes]
        writer.insert_network(IPSet([network]), record)
    writer.to_db_file(str(path))
    return path
