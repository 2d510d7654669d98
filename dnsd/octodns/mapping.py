"""octoDNS records ⇄ dnsd config entries (the table is in docs/octodns.md).

Static records become the YAML record entry of their name (one entry per name, so every
type at a name shares one TTL). A dynamic A or AAAA record `www` of zone `example.test`
becomes entries all named after it, `octodns~www.example.test~A` (BASE):

* the monitor BASE, from the record's `octodns.healthcheck` (HTTP, HTTPS or TCP) and
  dnsd-specific timing in `octodns.dnsd.healthcheck` (interval, timeout, thresholds);
* a pool BASE~POOL per octoDNS pool (its values as weighted backends, monitored), and the
  pool BASE for the record's own values, unmonitored: octoDNS serves those when every pool
  of a rule's chain is down;
* per geo rule i a load balancer BASE~rule{i} (`steering: off`, the rule's pool and its
  fallback chain, then BASE), so a client whose rule's pools are all down gets the
  record's values, as octoDNS promises, not another rule's pools;
* the load balancer BASE: `steering: geo` mapping each rule's geos to `lb:BASE~rule{i}` —
  a continent as each of its countries (octoDNS's own table), `EU-DE` as country DE,
  `NA-US-CA` as subdivision US-CA — the catch-all rule's chain as default pools, BASE as
  the fallback pool.

octoDNS rejects rules a more specific later rule would contradict, so dnsd's "most
specific location wins" gives the answers octoDNS's "first matching rule" gives. What has
no dnsd equivalent (subnet rules, value status, ICMP checks, a subdivision outside US/CA)
is refused when the plan is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from octodns.record.geo_data import geo_data

from dnsd.config.pool_refs import nested_lb
from dnsd.geo.regions import region_table

PREFIX = "octodns~"
CONTINENTS: dict[str, tuple[str, ...]] = {c: tuple(sorted(cs)) for c, cs in geo_data.items()}
CONTINENT_OF: dict[str, str] = {cc: c for c, cs in CONTINENTS.items() for cc in cs}
PROTOCOLS = {"HTTP": "http", "HTTPS": "https", "TCP": "tcp"}
DEFAULT_CHECK = {"protocol": "HTTPS", "port": 443, "path": "/_dns"}  # octoDNS's defaults
TIMING_KEYS = ("interval", "timeout", "healthy_threshold", "unhealthy_threshold")


class Unmappable(ValueError):
    """A record dnsd cannot serve as octoDNS means it: refused when the plan is made."""


def base_name(fqdn: str, rtype: str) -> str:
    return f"{PREFIX}{fqdn.rstrip('.').lower()}~{rtype}"


@dataclass
class Entries:
    """The dnsd entries one dynamic record needs, by section."""

    monitors: dict[str, dict[str, Any]] = field(default_factory=dict)
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)
    load_balancers: dict[str, dict[str, Any]] = field(default_factory=dict)


# -- octoDNS → dnsd --------------------------------------------------------------------------
def dynamic_entries(
    fqdn: str,
    rtype: str,
    ttl: int,
    values: list[str],
    pools: Mapping[str, dict[str, Any]],
    rules: list[dict[str, Any]],
    healthcheck: dict[str, Any],
    timing: dict[str, Any],
) -> Entries:
    """`pools`/`rules`: octoDNS's normalised dynamic data (pool id → {values: [{value,
    weight, status}], fallback}, rules [{pool, geos}]); `healthcheck`: protocol, host,
    path, port as octoDNS resolves them."""
    base = base_name(fqdn, rtype)
    out = Entries()
    protocol = str(healthcheck["protocol"]).upper()
    if protocol not in PROTOCOLS:
        raise Unmappable(
            f"{fqdn} {rtype}: healthcheck protocol {protocol}: dnsd probes HTTP, HTTPS or TCP"
        )
    monitor: dict[str, Any] = {"type": PROTOCOLS[protocol], "port": int(healthcheck["port"])}
    if protocol != "TCP":
        monitor.update(path=healthcheck["path"], host=healthcheck["host"])
    unknown = set(timing) - set(TIMING_KEYS)
    if unknown:
        raise Unmappable(
            f"{fqdn} {rtype}: octodns.dnsd.healthcheck: unknown {', '.join(sorted(unknown))} (known: {', '.join(TIMING_KEYS)})"
        )
    monitor.update(timing)
    out.monitors[base] = monitor
    out.pools[base] = {"backends": [_backend(v, 1) for v in values]}
    for pid, pool in pools.items():
        statuses = {v.get("status", "obey") for v in pool["values"]}
        if statuses != {"obey"}:
            raise Unmappable(
                f"{fqdn} {rtype}: pool {pid}: value status up/down is not supported (dnsd obeys the health check)"
            )
        backends = [_backend(v["value"], int(v.get("weight", 1))) for v in pool["values"]]
        out.pools[f"{base}~{pid}"] = {"monitor": base, "backends": backends}
    lb: dict[str, Any] = {
        "ttl": ttl,
        "steering": "off",
        "default_pools": [base],
        "fallback_pool": base,
    }
    countries: dict[str, list[str]] = {}
    subdivisions: dict[str, list[str]] = {}
    for i, rule in enumerate(rules):
        chain = [f"{base}~{pid}" for pid in _chain(pools, rule["pool"])]
        if rule.get("subnets"):
            raise Unmappable(f"{fqdn} {rtype}: rule {i + 1}: subnet rules are not supported")
        geos = rule.get("geos") or []
        if not geos:
            lb["default_pools"] = chain
            continue
        nested = f"{base}~rule{i}"
        out.load_balancers[nested] = {
            "ttl": ttl,
            "steering": "off",
            "default_pools": chain,
            "fallback_pool": base,
        }
        for geo in geos:
            _place(geo, [f"lb:{nested}"], countries, subdivisions, f"{fqdn} {rtype}: rule {i + 1}")
    if countries or subdivisions:
        lb["steering"] = "geo"
    if subdivisions:
        lb["subdivision_pools"] = subdivisions
    if countries:
        lb["country_pools"] = countries
    out.load_balancers[base] = lb
    return out


def _backend(value: str, weight: int) -> dict[str, Any]:
    backend: dict[str, Any] = {"name": value, "address": value}
    if weight != 1:
        backend["weight"] = weight
    return backend


def _chain(pools: Mapping[str, dict[str, Any]], pid: str) -> list[str]:
    chain = []
    current: str | None = pid
    while current is not None and current not in chain:  # octoDNS refuses loops already
        chain.append(current)
        current = pools[current].get("fallback")
    return chain


def _place(
    geo: str,
    target: list[str],
    countries: dict[str, list[str]],
    subdivisions: dict[str, list[str]],
    where: str,
) -> None:
    """One rule geo into the tables; an earlier rule keeps what it already placed."""
    parts = geo.upper().split("-")
    table = region_table()
    if len(parts) == 1:
        for cc in CONTINENTS.get(parts[0], ()):
            if cc in table.countries:
                countries.setdefault(cc, target)
    elif len(parts) == 2:
        if parts[1] not in table.countries:
            raise Unmappable(f"{where}: country {parts[1]} is not in dnsd's geo table")
        countries.setdefault(parts[1], target)
    else:
        code = f"{parts[1]}-{parts[2]}"
        if code not in table.subdivisions:
            raise Unmappable(f"{where}: {geo}: dnsd steers by US and CA subdivisions only")
        subdivisions.setdefault(code, target)


# -- dnsd → octoDNS --------------------------------------------------------------------------
def dynamic_record(base: str, config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The octoDNS data (ttl, values, dynamic, octodns.healthcheck) of the dynamic record
    whose entries start with `base`; None when they are not there as this module makes them."""
    lbs, pools, monitors = config["load_balancers"], config["pools"], config["monitors"]
    lb = lbs.get(base)
    if lb is None or base not in pools:
        return None
    octo_pools: dict[str, dict[str, Any]] = {}
    chains: list[list[str]] = []
    rules: list[tuple[int, dict[str, Any]]] = []
    where: dict[str, int] = {}  # country/subdivision → rule index
    for table in ("country_pools", "subdivision_pools"):
        for code, refs in (lb.get(table) or {}).items():
            nested = nested_lb(refs[0]) or refs[0]
            where[code] = int(nested.rsplit("~rule", 1)[1])
    for nested_name, nested in sorted(lbs.items()):
        if not nested_name.startswith(f"{base}~rule"):
            continue
        i = int(nested_name.rsplit("~rule", 1)[1])
        chain = [p.removeprefix(f"{base}~") for p in nested["default_pools"]]
        chains.append(chain)
        rules.append((i, {"pool": chain[0], "geos": _geos(i, where)}))
    rules.sort(key=lambda r: r[0])
    octo_rules = [rule for _, rule in rules]
    if lb["default_pools"] != [base]:
        chain = [p.removeprefix(f"{base}~") for p in lb["default_pools"]]
        chains.append(chain)
        octo_rules.append({"pool": chain[0]})
    for chain in chains:
        for pos, pid in enumerate(chain):
            backends = pools.get(f"{base}~{pid}", {}).get("backends", [])
            values = [{"value": b["address"], "weight": int(b.get("weight", 1))} for b in backends]
            pool = octo_pools.setdefault(pid, {"values": values})
            if pos + 1 < len(chain):
                pool["fallback"] = chain[pos + 1]
    monitor = monitors.get(base, {})
    fqdn = base.removeprefix(PREFIX).rsplit("~", 1)[0]
    resolved = {
        "protocol": str(monitor.get("type", "https")).upper(),
        "port": monitor.get("port", 443),
        "path": monitor.get("path", DEFAULT_CHECK["path"]),
        "host": monitor.get("host", fqdn),
    }
    # what octoDNS would assume anyway is left out, so a dump reads like what was written
    healthcheck = {k: v for k, v in resolved.items() if v != {**DEFAULT_CHECK, "host": fqdn}[k]}
    octodns: dict[str, Any] = {"healthcheck": healthcheck} if healthcheck else {}
    timing = {k: monitor[k] for k in TIMING_KEYS if k in monitor}
    if timing:
        octodns["dnsd"] = {"healthcheck": timing}
    return {
        "ttl": lb.get("ttl", 30),
        "values": [b["address"] for b in pools[base]["backends"]],
        "dynamic": {"pools": octo_pools, "rules": octo_rules},
        "octodns": octodns,
    }


def _geos(i: int, where: Mapping[str, int]) -> list[str]:
    """The geos of rule i, continents collapsed: a continent is rule i's when each of its
    countries went to rule i or to an earlier rule (the expansion gives earlier rules the
    first claim) and at least one went to rule i."""
    mine = {code for code, rule in where.items() if rule == i}
    known = region_table().countries
    geos = []
    for continent, members in CONTINENTS.items():
        inside = [cc for cc in members if cc in known]
        if inside and all(where.get(cc, i + 1) <= i for cc in inside) and mine & set(inside):
            geos.append(continent)
            mine -= set(inside)
    for code in sorted(mine):
        if "-" in code:
            geos.append(f"NA-{code}")
        else:
            geos.append(f"{CONTINENT_OF.get(code, 'NA')}-{code}")
    return sorted(geos)
