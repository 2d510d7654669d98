"""Validate and build the global sections of one file: monitors, pools, load_balancers,
tsig_keys, client_zones, client_networks.

One module per section checks its entries (`monitor_section`, `pool_section`,
`lb_section`, `tsig_section`); the two client tables, keyed by network, are read here.
Cross-references between sections (and across files) are checked in `loader.py`; here
each entry is checked on its own. Every problem is reported, then a best-effort value is
built so later checks can still run.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dnsd.config.checker import Checker, join
from dnsd.config.lb_section import load_balancer_entry
from dnsd.config.model import (
    LB_PREFIX,
    ClientNetwork,
    ClientZone,
    IPNetwork,
    LoadBalancer,
    Monitor,
    Pool,
    TsigKey,
)
from dnsd.config.monitor_section import monitor_entry
from dnsd.config.pool_section import pool_entry
from dnsd.config.refs import Ref
from dnsd.config.region_hint import regions_hint
from dnsd.config.tsig_section import tsig_keys
from dnsd.config.yamlio import LineDict
from dnsd.geo.regions import REGIONS, region_table


@dataclass(slots=True)
class Section:
    """What one file contributes to the global sections, with the line of each name."""

    monitors: dict[str, tuple[Monitor, int]]
    pools: dict[str, tuple[Pool, int]]
    load_balancers: dict[str, tuple[LoadBalancer, int]]
    client_zones: list[tuple[ClientZone, int]]
    refs: list[Ref]
    client_networks: list[tuple[ClientNetwork, int]]
    tsig_keys: dict[str, tuple[TsigKey, int]] = field(default_factory=dict)


def parse_sections(ck: Checker, doc: LineDict) -> Section:
    out = Section({}, {}, {}, [], [], [])
    tables: tuple[tuple[str, Any, dict[str, Any]], ...] = (
        ("monitors", monitor_entry, out.monitors),
        ("pools", pool_entry, out.pools),
        ("load_balancers", load_balancer_entry, out.load_balancers),
    )
    for key, parse, target in tables:
        if key not in doc:
            continue
        table = ck.mapping(doc[key], doc.line_of(key), key)
        if table is None:
            continue
        for name, spec in table.items():
            path = join(key, name)
            line = table.line_of(name)
            if not isinstance(name, str) or not name or name.startswith(LB_PREFIX):
                ck.error(line, path, "names must be non-empty strings not starting with 'lb:'")
                continue
            d = ck.mapping(spec, line, path)
            if d is not None:
                target[name] = (parse(ck, d, path, name, out.refs), line)
    if "client_zones" in doc:
        _client_zones(ck, doc, out)
    if "client_networks" in doc:
        _client_networks(ck, doc, out)
    if "tsig_keys" in doc:
        out.tsig_keys.update(tsig_keys(ck, doc))
    return out


# -- client zones and client networks: tables keyed by network ------------------------------
def _network_entries(
    ck: Checker, doc: LineDict, key: str
) -> Iterator[tuple[IPNetwork, Any, int, str]]:
    """(network, value, line, path) for each valid network key of the table `key`; a key
    that is not a network (host bits set included) is reported and left out."""
    m = ck.mapping(doc[key], doc.line_of(key), key)
    for subnet, value in (m or {}).items():
        line = m.line_of(subnet)  # type: ignore[union-attr]
        path = join(key, subnet)
        try:
            network = ipaddress.ip_network(str(subnet), strict=True)
        except ValueError as exc:
            ck.error(line, path, f"not a subnet: {exc}")
            continue
        yield network, value, line, path


def _client_zones(ck: Checker, doc: LineDict, out: Section) -> None:
    for network, zone, line, path in _network_entries(ck, doc, "client_zones"):
        if not isinstance(zone, str) or not zone:
            ck.error(line, path, "expected a zone name (string)")
            continue
        out.client_zones.append((ClientZone(network, zone), line))


def _client_networks(ck: Checker, doc: LineDict, out: Section) -> None:
    """`client_networks: {CIDR: {region: R, country: CC}}` (docs/steering.md, locating the client): at least one of
    the two; a country alone gives its region."""
    table = region_table()
    for network, spec, line, path in _network_entries(ck, doc, "client_networks"):
        d = ck.mapping(spec, line, path)
        if d is None:
            continue
        ck.keys(d, path, ("region", "country"))
        region = ck.get_str(d, "region", path, default=None)
        country = ck.get_str(d, "country", path, default=None)
        if region is not None and region not in REGIONS:
            ck.error(
                d.line_of("region"),
                join(path, "region"),
                f"unknown region {region!r} ({regions_hint(region)})",
            )
            continue
        if country is not None and country not in table.countries:
            ck.error(
                d.line_of("country"),
                join(path, "country"),
                f"unknown country code {country!r} (ISO 3166-1 alpha-2, upper case)",
            )
            continue
        region = region or table.region_of(country)
        if region is None:
            ck.error(line, path, "needs a region or a country")
            continue
        out.client_networks.append((ClientNetwork(network, region, country), line))
