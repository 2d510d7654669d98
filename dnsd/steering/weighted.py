"""`random`: a healthy pool drawn at random, weighted by pool `weight` (steering.md §2.2).

The fallback pool takes part in the draw whenever it is healthy (documented behaviour of
the source system; `dnsd check` warns). The result is a weighted random permutation, so
candidate[1] (the trickle backup) is the second draw.
"""

from __future__ import annotations

import random

from dnsd.config.model import LoadBalancer
from dnsd.steering.inputs import Able, Ordering, SteeringInputs, defaults_then_fallback


def order(lb: LoadBalancer, able: Able, inp: SteeringInputs) -> Ordering:
    refs = defaults_then_fallback(lb, able)
    pools = inp.snap.config.pools
    weights = [pools[r].weight if r in pools else 1.0 for r in refs]
    # The order itself is drawn per query (select.execute), so plans can be cached.
    return Ordering(refs, f"random: weighted draw over {len(refs)} pools", weights=weights)


def weighted_order(refs: list[str], weights: list[float], rng: random.Random) -> list[str]:
    """Draw without replacement: P(first = i) = w_i / Σw, then the same among the rest."""
    remaining = list(zip(refs, weights, strict=True))
    out: list[str] = []
    while remaining:
        total = sum(w for _, w in remaining)
        if total <= 0:  # only zero weights left: configured order
            out.extend(r for r, _ in remaining)
            break
        point = rng.random() * total
        for i, (ref, weight) in enumerate(remaining):
            point -= weight
            if point < 0 or i == len(remaining) - 1:
                out.append(ref)
                del remaining[i]
                break
    return out
