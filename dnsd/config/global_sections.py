"""Validate and build the global sections: monitors, pools, load_balancers, client_zones,
client_networks.

Cross-references between sections (and across files) are checked in `loader.py`; here
each entry is checked on its own. Every problem is reported, then a best-effort value is
built so later checks can still run.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
import re
import ssl
import sys
from collections.abc import Container, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from dnslib import QTYPE, RCODE

from dnsd.config import fields
from dnsd.config.checker import Checker, join, parse_duration
from dnsd.config.files import UnsafeFile, read_config_file
from dnsd.config.model import (
    LB_PREFIX,
    Backend,
    ClientNetwork,
    ClientZone,
    FailoverPolicy,
    IPNetwork,
    LoadBalancer,
    Monitor,
    Pool,
    TsigKey,
    ZonalAffinity,
)
from dnsd.config.names import absolute, name_problem
from dnsd.config.ramp import read_ramp
from dnsd.config.yamlio import LineDict
from dnsd.config.zone_section import MAX_TTL
from dnsd.geo.regions import REGIONS, region_table

MONITOR_TYPES = ("http", "https", "tcp", "dns")
MAX_LB_TTL = 300  # above this `dnsd check` warns: the outage bound grows with the TTL
STEERING_POLICIES = ("off", "random", "dynamic", "geo", "proximity")
# docs/steering.md, when all pools are down: what a name answers when nothing is healthy
WHEN_ALL_DOWN = ("fallback", "closed", "servfail", "all", "last_good")
# docs/steering.md, several pools per answer
MAX_ANSWER_POOLS = 8
DISTINCT = ("region", "zone", "domain")
AFFINITY_MODES = ("DISABLED", "STAY_WITHIN_ZONE", "SPILL_CROSS_ZONE")
_CODES_ITEM = re.compile(r"^([1-5])xx$|^(\d{3})(?:-(\d{3}))?$")

# Defaults shared by every entry that leaves them out: one object, not one per pool or load
# balancer (a big configuration has tens of thousands of them).
NO_AFFINITY = ZonalAffinity("DISABLED", 0.0)
NO_FAILOVER_POLICY = FailoverPolicy(0.0, False, configured=False)
NO_MAPPING: MappingProxyType[str, tuple[str, ...]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Ref:
    """A name one entry uses from another section, with where it was written."""

    kind: str  # "monitor" | "pool" | "lb"
    name: str
    file: str
    line: int
    where: str  # the path of the key, shared by the items of one list
    index: int | None = None  # the item's place in that list

    @property
    def path(self) -> str:
        """Made when an error is reported: stored, a path per reference would cost more
        than the reference itself in a big configuration."""
        return self.where if self.index is None else f"{self.where}[{self.index}]"


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


# Each entry's allowed and required keys, worked out once (not once per pool, backend and
# load balancer of a big configuration).
_MONITOR_KEYS = (fields.names(fields.MONITOR), fields.required(fields.MONITOR))
_POOL_KEYS = (fields.names(fields.POOL), fields.required(fields.POOL))
_BACKEND_KEYS = (fields.names(fields.BACKEND), fields.required(fields.BACKEND))
_LB_KEYS = (fields.names(fields.LOAD_BALANCER), fields.required(fields.LOAD_BALANCER))


def parse_sections(ck: Checker, doc: LineDict) -> Section:
    out = Section({}, {}, {}, [], [], [])
    tables: tuple[tuple[str, Any, dict[str, Any]], ...] = (
        ("monitors", _monitor, out.monitors),
        ("pools", _pool, out.pools),
        ("load_balancers", _load_balancer, out.load_balancers),
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
        _tsig_keys(ck, doc, out)
    return out


TSIG_ALGORITHMS = ("hmac-sha256", "hmac-sha512")
MIN_TSIG_SECRET = 16  # bytes; RFC 8945 §6 asks for at least the hash's output length


def _tsig_keys(ck: Checker, doc: LineDict, out: Section) -> None:
    """`tsig_keys`: name → algorithm and a base64 secret read from a file inside the config
    directory or from an environment variable (never from the YAML, never logged)."""
    table = ck.mapping(doc["tsig_keys"], doc.line_of("tsig_keys"), "tsig_keys")
    if table is None:
        return
    for name, spec in table.items():
        path = join("tsig_keys", name)
        line = table.line_of(name)
        key_name = absolute(str(name), ".")
        if not isinstance(name, str) or name_problem(key_name):
            ck.error(line, path, "a key name must be a DNS name (letters, digits, '-', '.')")
            continue
        d = ck.mapping(spec, line, path)
        if d is None:
            continue
        ck.keys(d, path, ("algorithm", "secret_file", "secret_env"))
        algorithm = ck.get_enum(d, "algorithm", path, TSIG_ALGORITHMS, default="hmac-sha256")
        if ("secret_file" in d) == ("secret_env" in d):
            ck.error(d.line, path, 'give exactly one of "secret_file" and "secret_env"')
            continue
        secret = _tsig_secret(ck, d, path)
        if secret is not None and algorithm is not None:
            out.tsig_keys[str(name)] = (TsigKey(str(name), algorithm, secret), line)


def _tsig_secret(ck: Checker, d: LineDict, path: str) -> bytes | None:
    key = "secret_file" if "secret_file" in d else "secret_env"
    value = ck.get_str(d, key, path)
    if value is None:
        return None
    where = join(path, key)
    if key == "secret_file":
        directory = Path(ck.file).parent
        try:
            text = read_config_file(directory, directory / str(value))
        except (UnsafeFile, OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            ck.error(d.line_of(key), where, f"cannot read the secret file {value}: {reason}")
            return None
    else:
        text = os.environ.get(str(value), "")
        if not text:
            ck.error(d.line_of(key), where, f"the environment variable {value} is not set")
            return None
    try:
        secret = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        ck.error(d.line_of(key), where, "the secret is not base64")  # its text is never shown
        return None
    if len(secret) < MIN_TSIG_SECRET:
        ck.error(d.line_of(key), where, f"the secret is shorter than {MIN_TSIG_SECRET} bytes")
        return None
    return secret


# -- monitors ------------------------------------------------------------------------------
def parse_expected_codes(value: Any) -> tuple[tuple[int, int], ...] | None:
    """`"2xx"`, `"200,301"`, `"200-299"` or 200 → inclusive ranges; None if malformed."""
    ranges = []
    for item in str(value).replace(" ", "").split(","):
        match = _CODES_ITEM.match(item)
        if not match:
            return None
        if match.group(1):
            base = int(match.group(1)) * 100
            ranges.append((base, base + 99))
        else:
            lo = int(match.group(2))
            hi = int(match.group(3) or lo)
            if not 100 <= lo <= hi <= 599:
                return None
            ranges.append((lo, hi))
    return tuple(ranges)


def _monitor(ck: Checker, d: LineDict, path: str, name: str, refs: list[Ref]) -> Monitor:
    ck.keys(d, path, *_MONITOR_KEYS)
    mtype = ck.get_enum(d, "type", path, MONITOR_TYPES, default="tcp")
    interval = ck.get_duration(d, "interval", path, default=15.0, lo=0.05)
    timeout = ck.get_duration(d, "timeout", path, default=5.0, lo=0.01)
    if timeout >= interval:  # also with a default: `interval: 1s` alone keeps timeout 5 s
        where = "timeout" if "timeout" in d else "interval"
        ck.warn(
            d.line_of(where),
            join(path, where),
            f"timeout ({timeout:g}s) is not shorter than the interval ({interval:g}s): a hung "
            "backend's probe runs into the next one and the outage bound grows",
        )
    codes: tuple[tuple[int, int], ...] = ((200, 299),)
    if "expected_codes" in d:
        parsed = parse_expected_codes(d["expected_codes"])
        if parsed is None:
            ck.error(
                d.line_of("expected_codes"),
                join(path, "expected_codes"),
                f'expected codes such as "200", "2xx" or "200,301", got {d["expected_codes"]!r}',
            )
        else:
            codes = parsed
    sources = []
    for src, line in ck.get_str_list(d, "sources", path, default=[]):
        if src not in REGIONS:
            ck.error(line, join(path, "sources"), f"unknown region {src!r} ({_regions_hint(src)})")
        else:
            sources.append(src)
    quorum = ck.get_int(d, "quorum", path, default=None, lo=1)
    if quorum is not None and sources and quorum > len(sources):
        ck.error(
            d.line_of("quorum"),
            join(path, "quorum"),
            f"quorum {quorum} is larger than the {len(sources)} sources",
        )
    headers: dict[str, str] = {}
    if "headers" in d:
        h = ck.mapping(d["headers"], d.line_of("headers"), join(path, "headers"))
        for k, v in (h or {}).items():
            headers[str(k)] = str(v)
    return Monitor(
        name=name,
        type=mtype,
        interval_s=interval,
        timeout_s=timeout,
        retries=ck.get_int(d, "retries", path, default=0, lo=0, hi=10),
        healthy_threshold=ck.get_int(d, "healthy_threshold", path, default=2, lo=1, hi=100),
        unhealthy_threshold=ck.get_int(d, "unhealthy_threshold", path, default=2, lo=1, hi=100),
        port=ck.get_int(d, "port", path, default=None, lo=1, hi=65535),
        method=str(ck.get_str(d, "method", path, default="GET")).upper(),
        path=ck.get_str(d, "path", path, default="/"),
        host=ck.get_str(d, "host", path, default=None),
        headers=MappingProxyType(headers),
        expected_codes=codes,
        expected_body=ck.get_str(d, "expected_body", path, default=None),
        follow_redirects=ck.get_bool(d, "follow_redirects", path, default=False),
        allow_insecure=ck.get_bool(d, "allow_insecure", path, default=False),
        sources=tuple(sources),
        quorum=quorum,
        initial=ck.get_enum(d, "initial", path, ("healthy", "unhealthy"), default="healthy"),
        rtt_ewma_alpha=ck.get_float(d, "rtt_ewma_alpha", path, default=0.3, lo=0.01, hi=1.0),
        ca_file=_ca_file(ck, d, path),
        expected_rcodes=_expected_rcodes(ck, d, path),
        query_name=_query_name(ck, d, path),
        query_type=_query_type(ck, d, path),
        quorum_hold_s=_quorum_hold(ck, d, path),
    )


def _quorum_hold(ck: Checker, d: LineDict, path: str) -> float | None:
    """`quorum_hold`: a duration (default 30 s) or `forever` (docs/health.md "Lost quorum")."""
    value = d.get("quorum_hold", 30.0)
    if value == "forever":
        return None
    hold = parse_duration(value)
    if hold is None:
        ck.error(
            d.line_of("quorum_hold"),
            join(path, "quorum_hold"),
            f"expected a duration such as 30s or 2m, or forever, got {value!r}",
        )
        return 30.0
    return hold


def _ca_file(ck: Checker, d: LineDict, path: str) -> str | None:
    """`ca_file`: PEM CA certificates for `https` probes, relative to the config file's
    directory. Loaded here once so a missing or broken file is a load error, not a probe
    that fails forever."""
    value = ck.get_str(d, "ca_file", path, default=None)
    if value is None:
        return None
    where = Path(ck.file).parent / value
    try:
        ssl.create_default_context(cafile=str(where))
    except (OSError, ssl.SSLError) as exc:
        ck.error(d.line_of("ca_file"), join(path, "ca_file"), f"cannot load CA file {where}: {exc}")
        return None
    return str(where.resolve())


def _expected_rcodes(ck: Checker, d: LineDict, path: str) -> tuple[int, ...]:
    """`expected_rcodes: [NOERROR, NXDOMAIN]` for `dns` probes; default NOERROR only."""
    out = []
    for name, line in ck.get_str_list(d, "expected_rcodes", path, default=[("NOERROR", 0)]):
        code = RCODE.reverse.get(name.upper())
        if code is None:
            ck.error(
                line,
                join(path, "expected_rcodes"),
                f"unknown rcode {name!r} (NOERROR, NXDOMAIN, …)",
            )
        else:
            out.append(code)
    return tuple(out) or (0,)


def _query_name(ck: Checker, d: LineDict, path: str) -> str:
    name = absolute(str(ck.get_str(d, "query_name", path, default=".")), ".")
    problem = name_problem(name)
    if problem:
        ck.error(d.line_of("query_name"), join(path, "query_name"), problem)
        return "."
    return name


def _query_type(ck: Checker, d: LineDict, path: str) -> int:
    text = str(ck.get_str(d, "query_type", path, default="SOA")).upper()
    code = QTYPE.reverse.get(text)
    if code is None:
        ck.error(d.line_of("query_type"), join(path, "query_type"), f"unknown record type {text!r}")
        return QTYPE.SOA
    return int(code)


# -- pools ---------------------------------------------------------------------------------
def _pool(ck: Checker, d: LineDict, path: str, name: str, refs: list[Ref]) -> Pool:
    ck.keys(d, path, *_POOL_KEYS)
    monitor = ck.get_str(d, "monitor", path, default=None)
    if monitor:
        refs.append(Ref("monitor", monitor, ck.file, d.line_of("monitor"), join(path, "monitor")))
    region = ck.get_str(d, "region", path, default=None)
    if region is not None and region not in REGIONS:
        ck.error(
            d.line_of("region"),
            join(path, "region"),
            f"unknown region {region!r} ({_regions_hint(region)})",
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


# -- load balancers ------------------------------------------------------------------------
def _load_balancer(ck: Checker, d: LineDict, path: str, name: str, refs: list[Ref]) -> LoadBalancer:
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
                "region": _regions_hint(loc_s),
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


def _regions_hint(value: str) -> str:
    import difflib

    close = difflib.get_close_matches(value.upper(), REGIONS, n=1, cutoff=0.5)
    if close:
        return f'did you mean "{close[0]}"?'
    return "one of " + " ".join(REGIONS)


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
                f"unknown region {region!r} ({_regions_hint(region)})",
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
