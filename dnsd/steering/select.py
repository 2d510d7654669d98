"""Answer records for a load-balanced name.

Until the steering policies land (issue 4) this is the simplest correct-looking rule the
core issue allows: the first default pool (following nested `lb:` entries), its enabled
backends of the asked address family, up to `max_answers`, in configuration order.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from dnslib import QTYPE

from dnsd.config.model import LB_PREFIX, Backend, LoadBalancer
from dnsd.snapshot import Snapshot

MAX_NESTING = 8


@dataclass(frozen=True, slots=True)
class LbAnswer:
    """Addresses (of the asked family) or a CNAME target, with the TTL to use."""

    addresses: tuple[str, ...]
    cname: str | None
    ttl: int
    ecs_scope: int = 0


def answer_load_balancer(snap: Snapshot, lb: LoadBalancer, qtype: int) -> LbAnswer:
    backends = _first_pool_backends(snap, lb)
    hostnames = [b.hostname for b in backends if b.hostname]
    family = ipaddress.IPv6Address if qtype == QTYPE.AAAA else ipaddress.IPv4Address
    addresses = [str(b.address) for b in backends if isinstance(b.address, family)]
    if not addresses and hostnames:
        return LbAnswer((), hostnames[0], lb.ttl)
    return LbAnswer(tuple(addresses[: lb.max_answers]), None, lb.ttl)


def _first_pool_backends(snap: Snapshot, lb: LoadBalancer) -> list[Backend]:
    config = snap.config
    for _ in range(MAX_NESTING):
        ref = lb.default_pools[0]
        if not ref.startswith(LB_PREFIX):
            pool = config.pools[ref]
            return [b for b in pool.backends if b.enabled]
        lb = config.load_balancers[ref[len(LB_PREFIX) :]]
    return []
