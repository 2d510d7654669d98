"""`off`: failover by priority (docs/steering.md, off).

Default pools in configured order; the first healthy one answers. The fallback pool is a
candidate only when every default pool is unhealthy (strict active/passive), so a trickle
never sends traffic to it while a default pool is up.
"""

from __future__ import annotations

from dnsd.config.model import LoadBalancer
from dnsd.steering.inputs import Able, Ordering, SteeringInputs, unique


def order(lb: LoadBalancer, able: Able, inp: SteeringInputs) -> Ordering:
    primary = lb.default_pools[0]
    refs = [r for r in unique(list(lb.default_pools)) if able(r)]
    if refs:
        return Ordering(refs, "off: healthy default pools in priority order", primary=primary)
    if lb.fallback_pool and able(lb.fallback_pool):
        return Ordering(
            [lb.fallback_pool],
            "off: every default pool is unhealthy: fallback pool",
            primary=primary,
        )
    return Ordering([], "off: no healthy pool", primary=primary)
