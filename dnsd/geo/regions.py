"""The 13 steering regions and the country/subdivision → region table.

The data is `regions.yaml` (copied from shared/reference, Cloudflare's region mapping
extended to every ISO 3166-1 code); it ships inside the package and is read once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

import yaml

REGIONS: tuple[str, ...] = (
    "WNAM",
    "ENAM",
    "WEU",
    "EEU",
    "NSAM",
    "SSAM",
    "OC",
    "ME",
    "NAF",
    "SAF",
    "SAS",
    "SEAS",
    "NEAS",
)


@dataclass(frozen=True, slots=True)
class RegionTable:
    names: MappingProxyType[str, str]  # code → human name
    countries: MappingProxyType[str, str]  # ISO 3166-1 alpha-2 → region
    subdivisions: MappingProxyType[str, str]  # "US-CA" → region

    def region_of(self, country: str | None, subdivision: str | None = None) -> str | None:
        """Region for a country (and optional subdivision code such as "CA"), or None."""
        if not country:
            return None
        country = country.upper()
        if subdivision:
            region = self.subdivisions.get(f"{country}-{subdivision.upper()}")
            if region:
                return region
        return self.countries.get(country)


@cache
def region_table() -> RegionTable:
    text = resources.files("dnsd.geo").joinpath("regions.yaml").read_text(encoding="utf-8")
    # libyaml's parser when PyYAML has it (the same values; the pure one takes about 0.08 s).
    data: dict[str, Any] = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return RegionTable(
        names=MappingProxyType(dict(data["regions"])),
        countries=MappingProxyType({str(k): str(v) for k, v in data["countries"].items()}),
        subdivisions=MappingProxyType({str(k): str(v) for k, v in data["subdivisions"].items()}),
    )
