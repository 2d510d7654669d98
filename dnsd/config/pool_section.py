"""The `pools` section: one pool entry checked and built, its backends, zonal affinity and
failover policy."""

from __future__ import annotations

import ipaddress
import sys

from dnsd.config import fields
from dnsd.config.checker import Checker, join
from dnsd.config.model import Backend, FailoverPolicy, Pool, ZonalAffinity
from dnsd.config.names import absolute, name_problem
from dnsd.config.refs import Ref
from dnsd.config.region_hint import regions_hint
from dnsd.config.yamlio import LineDict
from dnsd.geo.regions import REGIONS

AFFINITY_MODES = ("DISABLED", "STAY_WITHIN_ZONE", "SPILL_CROSS_ZONE")

# Defaults shared by every pool that leaves them out: one object, not one per pool (a big
# configuration has tens of thousands of them).
NO_AFFINITY = ZonalAffinity("DISABLED", 0.0)
NO_FAILOVER_POLICY = FailoverPolicy(0.0, False, configured=False)
# Each entry's allowed and required keys, worked out once (not once per pool and backend).
_POOL_KEYS = (fields.names(fields.POOL), fields.required(fields.POOL))
_BACKEND_KEYS = (fields.names(fields.BACKEND), fields.required(fields.BACKEND))


def pool_entry(ck: Checker, d: LineDict, path: str, name: str, refs: list[Ref]) -> Pool:
    ck.keys(d, path, *_POOL_KEYS)
    monitor = ck.get_str(d, "monitor", path, default=None)
    if monitor:
        refs.append(Ref("monitor", monitor, ck.file, d.line_of("monitor"), join(path, "monitor")))
    region = ck.get_str(d, "region", path, default=None)
    if region is not None and region not in REGIONS:
        ck.error(
            d.line_of("region"),
            join(path, "region"),
            f"unknown region {region!r} ({regions_hint(region)})",
        )
    backends = _backends(ck, d, path, refs)
    min_origins = ck.get_int(d, "minimum_origins", path, default=1, lo=1)
    if backends and min_origins and min_origins > len(backends):
        ck.warn(
            d.line_of("minimum_origins"),
            join(path, "minimum_origins"),
            f"{min_origins} is more than the pool's {len(backends)} backends: it can never be healthy",
        )
    affinity = _affinity(ck, d, path)
    policy = _failover_policy(ck, d, path)
    if affinity.mode != "DISABLED" and any(b.zone is None for b in backends):
        ck.warn(
            d.line_of("zonal_affinity"),
            join(path, "zonal_affinity"),
            "zonal affinity is on but some backends have no zone",
        )
    if policy.configured and not any(b.role == "failover" for b in backends):
        ck.warn(
            d.line_of("failover_policy"),
            join(path, "failover_policy"),
            "a failover policy is configured but no backend has role: failover",
        )
    return Pool(
        name=name,
        file=ck.file,
        monitor=monitor,
        minimum_origins=min_origins or 1,
        region=sys.intern(region) if region in REGIONS else None,  # one string per region
        latitude=ck.get_float(d, "latitude", path, default=None, lo=-90, hi=90),
        longitude=ck.get_float(d, "longitude", path, default=None, lo=-180, hi=180),
        weight=ck.get_float(d, "weight", path, default=1.0, lo=0.0),
        enabled=ck.get_bool(d, "enabled", path, default=True),
        zonal_affinity=affinity,
        failover_policy=policy,
        backends=tuple(backends),
        capacity=ck.get_float(d, "capacity", path, default=None, lo=0.001),
        domain=ck.get_str(d, "domain", path, default=None),
    )


def _affinity(ck: Checker, d: LineDict, path: str) -> ZonalAffinity:
    if "zonal_affinity" not in d:
        return NO_AFFINITY
    sub = join(path, "zonal_affinity")
    a = ck.mapping(d["zonal_affinity"], d.line_of("zonal_affinity"), sub)
    if a is None:
        return NO_AFFINITY
    ck.keys(a, sub, ("mode", "spillover_ratio"))
    mode = ck.get_enum(a, "mode", sub, AFFINITY_MODES, default="DISABLED")
    ratio = ck.get_float(a, "spillover_ratio", sub, default=0.0, lo=0.0, hi=1.0)
    if "spillover_ratio" in a and mode != "SPILL_CROSS_ZONE":
        ck.warn(
            a.line_of("spillover_ratio"),
            join(sub, "spillover_ratio"),
            "used only with mode SPILL_CROSS_ZONE",
        )
    return ZonalAffinity(mode, ratio)


def _failover_policy(ck: Checker, d: LineDict, path: str) -> FailoverPolicy:
    if "failover_policy" not in d:
        return NO_FAILOVER_POLICY
    sub = join(path, "failover_policy")
    p = ck.mapping(d["failover_policy"], d.line_of("failover_policy"), sub)
    if p is None:
        return NO_FAILOVER_POLICY
    ck.keys(p, sub, ("failover_ratio", "drop_traffic_if_unhealthy"))
    return FailoverPolicy(
        failover_ratio=ck.get_float(p, "failover_ratio", sub, default=0.0, lo=0.0, hi=1.0),
        drop_traffic_if_unhealthy=ck.get_bool(p, "drop_traffic_if_unhealthy", sub, default=False),
        configured=True,
    )


def _backends(ck: Checker, d: LineDict, path: str, refs: list[Ref]) -> list[Backend]:
    raw = d.get("backends")
    sub = join(path, "backends")
    if raw is None:
        return []
    if not isinstance(raw, list) or not raw:
        ck.error(d.line_of("backends"), sub, "expected a non-empty list of backends")
        return []
    out: list[Backend] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        bpath = f"{sub}[{i}]"
        b = ck.mapping(item, raw.line_of(i), bpath)  # type: ignore[attr-defined]
        if b is None:
            continue
        ck.keys(b, bpath, *_BACKEND_KEYS)
        name = ck.get_str(b, "name", bpath, default=None)
        if name in seen:
            ck.error(
                b.line_of("name"),
                join(bpath, "name"),
                f"duplicate backend name {name!r} in this pool",
            )
        seen.add(name)
        address, hostname = _backend_address(ck, b, bpath)
        monitor = ck.get_str(b, "monitor", bpath, default=None)
        if monitor:
            refs.append(
                Ref("monitor", monitor, ck.file, b.line_of("monitor"), join(bpath, "monitor"))
            )
        if name is None or (address is None and hostname is None):
            continue
        out.append(
            Backend(
                name=name,
                address=address,
                hostname=hostname,
                port=ck.get_int(b, "port", bpath, default=None, lo=1, hi=65535),
                zone=ck.get_str(b, "zone", bpath, default=None),
                role=ck.get_enum(b, "role", bpath, ("primary", "failover"), default="primary"),
                weight=ck.get_int(b, "weight", bpath, default=1, lo=0, hi=1_000_000),
                enabled=ck.get_bool(b, "enabled", bpath, default=True),
                monitor=monitor,
            )
        )
    return out


def _backend_address(
    ck: Checker, b: LineDict, path: str
) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address | None, str | None]:
    raw = ck.get_str(b, "address", path, default=None)
    if raw is None:
        return None, None
    try:
        return ipaddress.ip_address(raw), None
    except ValueError:
        pass
    host = absolute(raw, ".")
    if any(c.isdigit() for c in raw.replace(".", "")) and all(c.isdigit() or c == "." for c in raw):
        problem: str | None = "not a valid IP address"
    else:
        problem = name_problem(host)
    if problem:
        ck.error(
            b.line_of("address"),
            join(path, "address"),
            f"{raw!r} is neither an IP address nor a host name: {problem}",
        )
        return None, None
    return None, host
