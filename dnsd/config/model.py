"""The validated configuration as frozen values (docs/configuration.md). No behaviour here.

Names of zones and owners are absolute, lower-case, with a trailing dot
(`www.example.test.`). Durations are seconds (float). A pool reference in a load
balancer is either a pool name or `lb:NAME` for a nested load balancer.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

from dnslib import RD

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

LB_PREFIX = "lb:"


@dataclass(frozen=True, slots=True)
class Soa:
    mname: str
    rname: str
    serial: int
    refresh: int
    retry: int
    expire: int
    minimum: int
    ttl: int


@dataclass(frozen=True, slots=True, init=False)
class RRset:
    """Records of one type at one owner: their RDATA as dnslib objects (never mutate them).
    The owner, type and TTL are stored once here, not per record: a big zone holds
    100,000s of records, and the RRs are made when a reply is built. One RDATA is held as
    itself, several as a tuple: a tuple of one costs 56 bytes, on most sets of a big zone."""

    owner: str
    rtype: int
    ttl: int
    held: RD | tuple[RD, ...]

    def __init__(
        self,
        owner: str,
        rtype: int,
        ttl: int,
        rdatas: Sequence[RD] | None = None,
        held: RD | tuple[RD, ...] | None = None,  # what `dataclasses.replace` passes on
    ) -> None:
        if rdatas is not None:
            held = rdatas[0] if len(rdatas) == 1 else tuple(rdatas)
        object.__setattr__(self, "owner", owner)
        object.__setattr__(self, "rtype", rtype)
        object.__setattr__(self, "ttl", ttl)
        object.__setattr__(self, "held", held)

    @property
    def rdatas(self) -> tuple[RD, ...]:
        held = self.held
        return held if isinstance(held, tuple) else (held,)


@dataclass(frozen=True, slots=True)
class TsigKey:
    """`tsig_keys`: a shared secret for signed transfers and NOTIFY (RFC 8945)."""

    name: str  # as configured, e.g. "xfr-key"
    algorithm: Literal["hmac-sha256", "hmac-sha512"]
    secret: bytes = field(repr=False)  # never logged


@dataclass(frozen=True, slots=True)
class Transfer:
    """A zone's `transfer:` ACL: the address must match, and when `keys` is set a valid
    TSIG with one of them is required too."""

    allow: tuple[IPNetwork, ...]
    keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Catalog:
    """`catalog: {members: all | [ZONE, ...]}`: the zone is an RFC 9432 catalog (version 2)
    whose records dnsd makes from its members (dnsd.config.catalog)."""

    members: tuple[str, ...] | None  # None: `all`, every other zone with `transfer:`
    line: int = field(default=0, compare=False)  # where `members` is, for errors
    member_lines: tuple[int, ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class UpdateGrant:
    """One entry of a zone's `update:` section (RFC 2136 dynamic update): UPDATEs signed
    with `key` may add and delete records of `types` at owners matching `names`."""

    key: str  # a tsig_keys entry
    names: tuple[tuple[str, ...], ...]  # patterns as labels relative to the zone: () = apex,
    # "*" = one or more labels
    types: frozenset[int]


@dataclass(frozen=True, slots=True)
class Zone:
    name: str
    file: str
    ttl: int
    soa: Soa
    rrsets: tuple[RRset, ...]
    lb_names: Mapping[str, str]  # owner → load balancer name
    serial_auto: bool = True  # `serial: auto`; otherwise soa.serial is a floor
    transfer: Transfer | None = None  # None: nobody may transfer the zone
    notify: tuple[tuple[str, int], ...] = ()  # secondaries told of every serial change
    dnssec_algorithm: int | None = None  # `dnssec: {algorithm: 13|15}`; None: unsigned
    dnssec_split_keys: bool = False  # a KSK and a ZSK instead of one CSK
    catalog: Catalog | None = None  # this zone is a catalog zone (RFC 9432)
    catalog_group: str | None = None  # the RFC 9432 group property in catalogs listing it
    update: tuple[UpdateGrant, ...] | None = None  # None: every UPDATE is REFUSED


@dataclass(frozen=True, slots=True)
class Monitor:
    name: str
    type: Literal["http", "https", "tcp", "dns"]
    interval_s: float
    timeout_s: float
    retries: int
    healthy_threshold: int
    unhealthy_threshold: int
    port: int | None
    method: str
    path: str
    host: str | None
    headers: Mapping[str, str]
    expected_codes: tuple[tuple[int, int], ...]  # inclusive ranges, e.g. (200, 299)
    expected_body: str | None
    follow_redirects: bool
    allow_insecure: bool
    sources: tuple[str, ...]  # probe source regions; empty = the node's own
    quorum: int | None  # None = majority of sources
    initial: Literal["healthy", "unhealthy"]
    rtt_ewma_alpha: float
    ca_file: str | None = None  # https: trust these CAs (absolute path) instead of the system's
    expected_rcodes: tuple[int, ...] = (0,)  # dns: rcodes that count as success (NOERROR)
    query_name: str = "."  # dns: the question a probe asks
    query_type: int = 6  # dns: SOA
    # How long a verdict is held while fewer than a quorum of sources are fresh, before the
    # fresh sources decide by their own majority (docs/health.md "Lost quorum"); None = forever.
    quorum_hold_s: float | None = 30.0


@dataclass(frozen=True, slots=True)
class Backend:
    name: str
    address: IPAddress | None  # None for a hostname backend (answered as CNAME)
    hostname: str | None
    port: int | None
    zone: str | None
    role: Literal["primary", "failover"]
    weight: int
    enabled: bool
    monitor: str | None  # overrides the pool's monitor
    address_text: str = field(default="", compare=False)  # str(address), made once: used per query

    def __post_init__(self) -> None:
        if not self.address_text and self.address is not None:
            object.__setattr__(self, "address_text", str(self.address))


@dataclass(frozen=True, slots=True)
class ZonalAffinity:
    mode: Literal["DISABLED", "STAY_WITHIN_ZONE", "SPILL_CROSS_ZONE"]
    spillover_ratio: float


@dataclass(frozen=True, slots=True)
class FailoverPolicy:
    failover_ratio: float
    drop_traffic_if_unhealthy: bool
    configured: bool  # a policy block was written (spec: "has a failover policy")


@dataclass(frozen=True, slots=True)
class Ramp:
    """docs/steering.md, ramps: a move away from a healthy pool in `steps` equal shares."""

    duration_s: float
    steps: int


@dataclass(frozen=True, slots=True)
class Pool:
    name: str
    file: str
    monitor: str | None
    minimum_origins: int
    region: str | None
    latitude: float | None
    longitude: float | None
    weight: float
    enabled: bool
    zonal_affinity: ZonalAffinity
    failover_policy: FailoverPolicy
    backends: tuple[Backend, ...]
    # docs/steering.md, capacity waterfall: answers per second it should get at most
    capacity: float | None = None
    domain: str | None = None  # a failure-domain label for `distinct: domain` (docs/steering.md)


SteeringPolicy = Literal["off", "random", "dynamic", "geo", "proximity"]
STEERING_POLICIES: Final[tuple[str, ...]] = get_args(SteeringPolicy)  # the one list


@dataclass(frozen=True, slots=True)
class LoadBalancer:
    name: str
    file: str
    ttl: int
    steering: SteeringPolicy
    default_pools: tuple[str, ...]
    fallback_pool: str | None
    region_pools: Mapping[str, tuple[str, ...]]
    country_pools: Mapping[str, tuple[str, ...]]
    pop_pools: Mapping[str, tuple[str, ...]]
    trickle_ratio: float
    max_answers: int
    selection: Literal["random", "hash"]
    min_samples: int
    rtt_max_age_s: float
    client_region: Literal["client", "pop"] = "client"  # docs/steering.md, locating the client
    # "US-CA" → pools: more specific than a country (an addition to docs/steering.md, geo)
    subdivision_pools: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # `dnsd check` errors when the worst-case outage is above it (docs/steering.md, the
    # outage budget); the line is where it was written, for that error.
    max_outage_s: float | None = None
    max_outage_line: int = field(default=0, compare=False, repr=False)  # not in the class key
    # docs/steering.md, when all pools are down: nothing healthy, the fallback included
    when_all_down: Literal["fallback", "closed", "servfail", "all", "last_good"] = "fallback"
    ramp: Ramp | None = None  # docs/steering.md, ramps: None moves at once
    # docs/steering.md, capacity waterfall: fill a region's pools in order up to capacity
    overflow: Literal["waterfall"] | None = None
    # docs/steering.md, several pools per answer: one address from each of the first N
    # healthy pools, none sharing the `distinct` label with one already in the answer
    answer_pools: int = 1
    distinct: Literal["region", "zone", "domain"] | None = None
    answer_pools_line: int = field(default=0, compare=False, repr=False)  # for its errors

    def listed(self, ref: str) -> bool:
        """`ref` is one of the LB's own pools (default or mapped), not only its fallback."""
        return ref in self.default_pools or any(
            ref in pools
            for table in (
                self.pop_pools,
                self.subdivision_pools,
                self.country_pools,
                self.region_pools,
            )
            for pools in table.values()
        )

    def pool_refs(self) -> tuple[str, ...]:
        """Every pool reference of this LB, in configuration order, without repeats."""
        refs: list[str] = list(self.default_pools)
        for table in (
            self.pop_pools,
            self.subdivision_pools,
            self.country_pools,
            self.region_pools,
        ):
            for pools in table.values():
                refs.extend(pools)
        if self.fallback_pool:
            refs.append(self.fallback_pool)
        return tuple(dict.fromkeys(refs))


@dataclass(frozen=True, slots=True)
class ClientZone:
    network: IPNetwork
    zone: str


@dataclass(frozen=True, slots=True)
class ClientNetwork:
    """`client_networks`: a network placed by the operator (docs/steering.md, locating the client)."""

    network: IPNetwork
    region: str  # given, or the country's region
    country: str | None


@dataclass(frozen=True, slots=True)
class Config:
    zones: tuple[Zone, ...]
    monitors: Mapping[str, Monitor]
    pools: Mapping[str, Pool]
    load_balancers: Mapping[str, LoadBalancer]
    client_zones: tuple[ClientZone, ...]
    client_networks: tuple[ClientNetwork, ...] = ()
    tsig_keys: Mapping[str, TsigKey] = field(default_factory=dict)
