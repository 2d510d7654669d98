"""The `load_balancers` section: one load balancer entry checked and built — its pools,
steering policy, per-location pool tables, TTL and what it answers when all is down."""

from __future__ import annotations

from collections.abc import Container
from types import MappingProxyType

from dnsd.config import fields
from dnsd.config.checker import Checker, join
from dnsd.config.model import STEERING_POLICIES, LoadBalancer
from dnsd.config.ramp import read_ramp
from dnsd.config.refs import Ref
from dnsd.config.region_hint import regions_hint
from dnsd.config.yamlio import LineDict
from dnsd.config.zone_section import MAX_TTL
from dnsd.geo.regions import REGIONS, region_table

MAX_LB_TTL = 300  # above this `dnsd check` warns: the outage bound grows with the TTL
# docs/steering.md, when all pools are down: what a name answers when nothing is healthy
WHEN_ALL_DOWN = ("fallback", "closed", "servfail", "all", "last_good")
# docs/steering.md, several pools per answer
MAX_ANSWER_POOLS = 8
DISTINCT = ("region", "zone", "domain")
# Shared by every load balancer without a table: one object, not one per load balancer.
NO_MAPPING: MappingProxyType[str, tuple[str, ...]] = MappingProxyType({})
_LB_KEYS = (fields.names(fields.LOAD_BALANCER), fields.required(fields.LOAD_BALANCER))


def load_balancer_entry(
    ck: Checker, d: LineDict, path: str, name: str, refs: list[Ref]
) -> LoadBalancer:
    ck.keys(d, path, *_LB_KEYS)
    default_pools = _pool_list(ck, d, "default_pools", path, refs)
    if "default_pools" in d and not default_pools:
        ck.error(d.line_of("default_pools"), join(path, "default_pools"), "needs at least one pool")
    fallback = ck.get_str(d, "fallback_pool", path, default=None)
    if fallback:
        refs.append(
            Ref("pool", fallback, ck.file, d.line_of("fallback_pool"), join(path, "fallback_pool"))
        )
    table = region_table()
    steering = ck.get_enum(d, "steering", path, STEERING_POLICIES, default="off")
    if steering == "random" and fallback:
        ck.warn(
            d.line_of("fallback_pool"),
            join(path, "fallback_pool"),
            "with steering: random the fallback pool takes part in every draw while healthy",
        )
    trickle = ck.get_float(d, "trickle_ratio", path, default=0.0, lo=0.0, hi=1.0)
    if steering == "random" and trickle:
        ck.warn(
            d.line_of("trickle_ratio"),
            join(path, "trickle_ratio"),
            "steering: random has no primary pool: the trickle ratio is ignored (docs/steering.md, trickle)",
        )
    if steering == "off" and trickle:
        # `off` reads as strict active/passive; a trickle sends a share to the standby anyway.
        ck.warn(
            d.line_of("trickle_ratio"),
            join(path, "trickle_ratio"),
            f"steering: off with trickle_ratio {trickle:g}: while the first default pool is "
            f"healthy, {trickle:.0%} of answers still go to the next healthy pool (not strict "
            "active/passive; docs/steering.md, trickle)",
        )
    ttl = ck.get_int(d, "ttl", path, default=30, lo=0, hi=MAX_TTL)
    if ttl > MAX_LB_TTL:
        ck.warn(
            d.line_of("ttl"),
            join(path, "ttl"),
            f"ttl {ttl} s is above {MAX_LB_TTL} s: clients may keep a dead pool's answer that "
            "long (outage bound = TTL + interval × unhealthy_threshold + probe timeout, "
            "docs/steering.md, the outage budget)",
        )
    return LoadBalancer(
        name=name,
        file=ck.file,
        ttl=ttl,
        steering=steering,
        default_pools=tuple(default_pools),
        fallback_pool=fallback,
        region_pools=_pool_table(ck, d, "region_pools", path, refs, REGIONS, "region"),
        country_pools=_pool_table(
            ck, d, "country_pools", path, refs, table.countries, "country code"
        ),
        subdivision_pools=_pool_table(
            ck, d, "subdivision_pools", path, refs, table.subdivisions, "subdivision"
        ),
        pop_pools=_pool_table(ck, d, "pop_pools", path, refs, None, "PoP"),
        trickle_ratio=trickle,
        max_answers=ck.get_int(d, "max_answers", path, default=1, lo=1, hi=64),
        selection=ck.get_enum(d, "selection", path, ("random", "hash"), default="random"),
        min_samples=ck.get_int(d, "min_samples", path, default=3, lo=1),
        rtt_max_age_s=ck.get_duration(d, "rtt_max_age", path, default=600.0, lo=1.0),
        client_region=ck.get_enum(d, "client_region", path, ("client", "pop"), default="client"),
        max_outage_s=ck.get_duration(d, "max_outage", path, default=None, lo=0.001),
        max_outage_line=d.line_of("max_outage"),
        when_all_down=ck.get_enum(d, "when_all_down", path, WHEN_ALL_DOWN, default="fallback"),
        ramp=read_ramp(ck, d, path, ttl),
        overflow=ck.get_enum(d, "overflow", path, ("waterfall",), default=None),
        answer_pools=ck.get_int(d, "answer_pools", path, default=1, lo=1, hi=MAX_ANSWER_POOLS),
        distinct=ck.get_enum(d, "distinct", path, DISTINCT, default=None),
        answer_pools_line=d.line_of("answer_pools" if "answer_pools" in d else "distinct"),
    )


def _pool_list(ck: Checker, d: LineDict, key: str, path: str, refs: list[Ref]) -> list[str]:
    items = ck.get_str_list(d, key, path, default=[])
    out, where = [], join(path, key)
    for i, (pool, line) in enumerate(items):
        refs.append(Ref("pool", pool, ck.file, line, where, i))
        out.append(pool)
    return out


def _pool_table(
    ck: Checker,
    d: LineDict,
    key: str,
    path: str,
    refs: list[Ref],
    valid_keys: Container[str] | None,
    what: str,
) -> MappingProxyType[str, tuple[str, ...]]:
    if key not in d:
        return NO_MAPPING
    sub = join(path, key)
    m = ck.mapping(d[key], d.line_of(key), sub)
    out: dict[str, tuple[str, ...]] = {}
    for loc, pools in (m or {}).items():
        loc_s = str(loc)
        line = m.line_of(loc)  # type: ignore[union-attr]
        if valid_keys is not None and loc_s not in valid_keys:
            hint = {
                "region": regions_hint(loc_s),
                "subdivision": "a US or CA subdivision, ISO 3166-2 such as US-CA",
            }.get(what, "ISO 3166-1 alpha-2, upper case")
            ck.error(line, join(sub, loc_s), f"unknown {what} {loc_s!r} ({hint})")
            continue
        names, where = [], join(sub, loc_s)
        for i, (pool, item_line) in enumerate(ck.str_list(pools, line, where)):
            refs.append(Ref("pool", pool, ck.file, item_line, where, i))
            names.append(pool)
        out[loc_s] = tuple(names)
    return MappingProxyType(out)
