"""The lab's fixed topology (pure): three regions, a Redis namespace and a hub with a bridge.

    dnsdlab-hub: bridge lab0 ─┬─ veth ─ dnsdlab-wnam  10.77.1.0/24  node .10, unbound .53,
                              │                               backends .21 .22, control .20
                              ├─ veth ─ dnsdlab-enam  10.77.2.0/24  (the same layout)
                              ├─ veth ─ dnsdlab-weu   10.77.3.0/24
                              └─ veth ─ dnsdlab-redis 10.77.0.2     redis-server :6379 (primary)
                                                      10.77.0.6     redis-server :6379 (replica)
                                                      10.77.0.3-5   redis-sentinel :26379

The nodes reach Redis through the sentinels (redis+sentinel://, service `lab`), as a
production cluster would, so a failover of the primary is one more fault to drill.

All addresses are in 10.77.0.0/16 and exist only inside these namespaces (one L2 segment,
/16 on every interface). Each region's clients are its own namespace: client_networks
place 10.77.N.0/24 in the region, so a region's resolver is located there.
"""

from __future__ import annotations

from dataclasses import dataclass

from dnsd.lab.netns import PREFIX

HUB = f"{PREFIX}hub"
REDIS_NS = f"{PREFIX}redis"
REDIS = "10.77.0.2"  # the first primary
REDIS_REPLICA = "10.77.0.6"
SENTINELS = ("10.77.0.3", "10.77.0.4", "10.77.0.5")
SENTINEL_PORT = 26379
REDIS_SERVICE = "lab"
REDIS_URL = (
    "redis+sentinel://"
    + ",".join(f"{a}:{SENTINEL_PORT}" for a in SENTINELS)
    + f"/{REDIS_SERVICE}/0"
)
BRIDGE = "lab0"
MASK = 16
TTL_S = 2
INTERVAL_S = 0.5
THRESHOLD = 2
BACKEND_PORT = 8080
TOKEN = "dnsd-lab-token"
ZONE = "lab.test"


@dataclass(frozen=True)
class Region:
    code: str  # WNAM
    index: int  # 1 → 10.77.1.0/24

    @property
    def ns(self) -> str:
        return f"{PREFIX}{self.code.lower()}"

    def address(self, host: int) -> str:
        return f"10.77.{self.index}.{host}"

    @property
    def node(self) -> str:
        return self.address(10)

    @property
    def resolver(self) -> str:
        return self.address(53)

    @property
    def control(self) -> str:
        return self.address(20)

    @property
    def backends(self) -> dict[str, str]:
        return {f"{self.code.lower()}{i}": self.address(20 + i) for i in (1, 2)}

    @property
    def pool(self) -> str:
        return self.code.lower()


REGIONS = (Region("WNAM", 1), Region("ENAM", 2), Region("WEU", 3))
NEXT = {"WNAM": "ENAM", "ENAM": "WNAM", "WEU": "ENAM"}  # where a region's clients go next
# One-way path delays between regions (ms), as a probe from one region to a backend in the
# other sees them: WNAM–ENAM 35, ENAM–WEU 40, WNAM–WEU 70.
DELAY_MS = {
    frozenset({"WNAM", "ENAM"}): 35.0,
    frozenset({"ENAM", "WEU"}): 40.0,
    frozenset({"WNAM", "WEU"}): 70.0,
}


def config() -> str:
    """dnsd's configuration, the same file on every node."""
    ns_names = " ".join(f"ns{r.index}.{ZONE}.," for r in REGIONS).rstrip(",")
    lines = [
        f"zone: {ZONE}",
        "ttl: 60",
        f"soa: {{mname: ns1.{ZONE}., rname: h.{ZONE}., minimum: 1}}",
        "records:",
        f'  "@": {{NS: [{ns_names}]}}',
        *(f"  ns{r.index}: {{A: {r.node}}}" for r in REGIONS),
        "  www: {lb: www}",
        "  dyn: {lb: dyn}",
        "monitors:",
        f"  web: {{type: http, path: /healthz, port: {BACKEND_PORT}, interval: {INTERVAL_S}s, timeout: 0.4s, "
        f"healthy_threshold: 2, unhealthy_threshold: {THRESHOLD}, sources: [{', '.join(r.code for r in REGIONS)}], quorum: 2}}",
        "pools:",
    ]
    for r in REGIONS:
        backends = ", ".join(f"{{name: {n}, address: {a}}}" for n, a in r.backends.items())
        lines.append(f"  {r.pool}: {{monitor: web, region: {r.code}, backends: [{backends}]}}")
    lines.append("client_networks:")
    lines += [f"  10.77.{r.index}.0/24: {{region: {r.code}}}" for r in REGIONS]
    region_pools = ", ".join(f"{r.code}: [{r.pool}, {NEXT[r.code].lower()}]" for r in REGIONS)
    lines += [
        "load_balancers:",
        f"  www: {{ttl: {TTL_S}, steering: geo, default_pools: [enam, wnam, weu], "
        f"region_pools: {{{region_pools}}}, max_answers: 2}}",
        f"  dyn: {{ttl: {TTL_S}, steering: dynamic, default_pools: [wnam, enam, weu], min_samples: 3}}",
    ]
    return "\n".join(lines) + "\n"


def redis_config(address: str, directory: str, primary: str | None = None) -> str:
    """A Redis server of the lab: the primary, or (with `primary`) its replica."""
    lines = [
        f"bind {address}",
        "port 6379",
        'save ""',
        "appendonly no",
        "protected-mode no",
        f'dir "{directory}"',
        f"replica-announce-ip {address}",
        f"bind-source-addr {address}",
    ]
    if primary is not None:
        lines.append(f"replicaof {primary} 6379")
    return "\n".join(lines) + "\n"


def sentinel_config(address: str, directory: str) -> str:
    """One of three sentinels: the primary is down after 1 s, two of three agree."""
    return (
        "\n".join(
            [
                f"bind {address}",
                f"port {SENTINEL_PORT}",
                f'dir "{directory}"',
                "protected-mode no",
                f"sentinel announce-ip {address}",
                f"bind-source-addr {address}",
                f"sentinel monitor {REDIS_SERVICE} {REDIS} 6379 2",
                f"sentinel down-after-milliseconds {REDIS_SERVICE} 1000",
                f"sentinel failover-timeout {REDIS_SERVICE} 5000",
            ]
        )
        + "\n"
    )


def unbound_config(region: Region, directory: str) -> str:
    stubs = "\n".join(f"    stub-addr: {r.node}" for r in REGIONS)
    return f"""\
server:
    interface: {region.resolver}
    port: 53
    do-daemonize: no
    username: ""
    chroot: ""
    directory: "{directory}"
    pidfile: ""
    use-syslog: no
    logfile: ""
    verbosity: 0
    access-control: 10.77.0.0/16 allow
    module-config: "iterator"
    cache-min-ttl: 0
    prefetch: no
    qname-minimisation: no
    num-threads: 1
    local-zone: "test." nodefault
remote-control:
    control-enable: no
stub-zone:
    name: "{ZONE}"
{stubs}
"""
