"""`random`: a healthy pool drawn at random, weighted by pool `weight` (docs/steering.md, random).

The fallback pool takes part in the draw whenever it is healthy (documented behaviour of
the source system; `dnsd check` warns). Only the first pick is drawn, per query
(`select.compile_plan`); there is no primary, so no trickle.
"""

from __future__ import annotations

from dnsd.config.model import LoadBalancer
from dnsd.steering.inputs import Able, Ordering, SteeringInputs, defaults_then_fallback


def order(lb: LoadBalancer, able: Able, inp: SteeringInputs) -> Ordering:
    refs = defaults_then_fallback(lb, able)
    pools = inp.snap.config.pools
    weights = [pools[r].weight if r in pools else 1.0 for r in refs]
    # The pick itself is drawn per query (select.compile_plan), so plans can be cached.
    return Ordering(refs, f"random: weighted draw over {len(refs)} pools", weights=weights)
