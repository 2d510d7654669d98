"""`proximity`: the nearest healthy pool by great-circle distance (docs/steering.md, proximity).

The client's coordinates come from the geo database; without them the pools are used in
failover order. Pools without coordinates rank after those with them; the fallback pool
(unless it is also a default pool) is never ranked by distance: it comes last. The primary
(docs/steering.md, trickle) is the nearest pool before health is applied.
"""

from __future__ import annotations

import math

from dnsd.config.model import LoadBalancer
from dnsd.steering.inputs import Able, Ordering, SteeringInputs, defaults_then_fallback, unique

EARTH_RADIUS_KM = 6371.0


def distance_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Haversine great-circle distance."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(a))


def order(lb: LoadBalancer, able: Able, inp: SteeringInputs) -> Ordering:
    refs = defaults_then_fallback(lb, able)
    loc = inp.client.location
    if loc.latitude is None or loc.longitude is None:
        return Ordering(
            refs,
            "proximity: client coordinates unknown: failover order",
            primary=lb.default_pools[0],
        )
    pools = inp.snap.config.pools
    dist: dict[str, float] = {}
    for ref in unique(list(lb.default_pools)):  # every listed pool, healthy or not
        pool = pools.get(ref)
        if pool is not None and pool.latitude is not None and pool.longitude is not None:
            dist[ref] = distance_km(loc.latitude, loc.longitude, pool.latitude, pool.longitude)
    nearest = sorted(dist, key=dist.__getitem__)
    ranked = [r for r in nearest if r in refs] + [r for r in refs if r not in dist]
    shown = ", ".join(f"{r} {dist[r]:.0f} km" for r in ranked if r in dist)
    primary = nearest[0] if nearest else lb.default_pools[0]
    return Ordering(ranked, f"proximity: {shown}", location_dependent=True, primary=primary)
