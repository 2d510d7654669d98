"""Small builders for config values in unit tests (the YAML path is tested elsewhere)."""

from __future__ import annotations

import ipaddress
from types import MappingProxyType

from dnsd.config.model import Backend, FailoverPolicy, LoadBalancer, Pool, ZonalAffinity


def backend(
    name: str,
    zone: str | None = None,
    role: str = "primary",
    address: str = "192.0.2.1",
    weight: int = 1,
    enabled: bool = True,
) -> Backend:
    return Backend(
        name=name,
        address=ipaddress.ip_address(address),
        hostname=None,
        port=None,
        zone=zone,
        role=role,
        weight=weight,
        enabled=enabled,
        monitor=None,
    )  # type: ignore[arg-type]


def pool(
    name: str,
    backends: list[Backend],
    *,
    mode: str = "DISABLED",
    spill: float = 0.0,
    failover_ratio: float | None = None,
    drop: bool = False,
    region: str | None = "ENAM",
    minimum_origins: int = 1,
    weight: float = 1.0,
    lat: float | None = None,
    lon: float | None = None,
    enabled: bool = True,
) -> Pool:
    policy = FailoverPolicy(failover_ratio or 0.0, drop, configured=failover_ratio is not None)
    return Pool(
        name=name,
        file="test",
        monitor=None,
        minimum_origins=minimum_origins,
        region=region,
        latitude=lat,
        longitude=lon,
        weight=weight,
        enabled=enabled,
        zonal_affinity=ZonalAffinity(mode, spill),
        failover_policy=policy,  # type: ignore[arg-type]
        backends=tuple(backends),
    )


def lb(
    name: str,
    default_pools: list[str],
    *,
    steering: str = "off",
    fallback: str | None = None,
    region_pools: dict | None = None,
    country_pools: dict | None = None,
    pop_pools: dict | None = None,
    subdivision_pools: dict | None = None,
    trickle: float = 0.0,
    max_answers: int = 1,
    selection: str = "random",
    ttl: int = 30,
    min_samples: int = 3,
    rtt_max_age_s: float = 600.0,
    client_region: str = "client",
) -> LoadBalancer:
    def table(d: dict | None) -> MappingProxyType:
        return MappingProxyType({k: tuple(v) for k, v in (d or {}).items()})

    return LoadBalancer(
        name=name,
        file="test",
        ttl=ttl,
        steering=steering,  # type: ignore[arg-type]
        default_pools=tuple(default_pools),
        subdivision_pools=table(subdivision_pools),
        fallback_pool=fallback,
        region_pools=table(region_pools),
        country_pools=table(country_pools),
        pop_pools=table(pop_pools),
        trickle_ratio=trickle,
        max_answers=max_answers,
        selection=selection,
        min_samples=min_samples,
        rtt_max_age_s=rtt_max_age_s,
        client_region=client_region,  # type: ignore[arg-type]
    )  # type: ignore[arg-type]


def primary_standby_zone(zone: str) -> str:
    """A zone whose `www` is load-balanced (`web`) over a primary and a standby pool of one
    unprobed backend each: the smallest config with an active pool to report."""
    return f"""\
zone: {zone}
soa: {{mname: ns1.{zone}., rname: h.{zone}.}}
records:
  "@": {{NS: ns1.{zone}.}}
  ns1: {{A: 192.0.2.1}}
  www: {{lb: web}}
pools:
  primary: {{backends: [{{name: p1, address: 192.0.2.10}}]}}
  standby: {{backends: [{{name: s1, address: 192.0.2.20}}]}}
load_balancers:
  web: {{ttl: 1, default_pools: [primary, standby]}}
"""
