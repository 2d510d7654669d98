"""The capacity waterfall (docs/steering.md, capacity waterfall) as draws.

With `overflow: waterfall` a client region's answers go to its pools in their order (the
same order as without it): a pool that is full takes only the share `admit` of the answers
that reach it (the health view's `pool_admit`, which dnsd.serve.pool_load sets from the
answers each pool got over the last 10 s and its `capacity`); the rest spill to the next
pool. The last pool takes whatever reaches it. A pool that takes everything (no capacity,
or room to spare) ends the chain: the pools after it get nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dnsd.config.model import Pool
from dnsd.health.view import HealthView
from dnsd.steering.draws import Draw, Node, Taken


def chain(
    refs: Sequence[str], admits: Mapping[str, float], branch: Callable[[str], Node], owner: Any
) -> Node:
    """The draws for `refs` in order: at each full pool one draw, below its admit share → that
    pool, else on to the next."""
    node = branch(refs[-1])
    for ref in reversed(refs[:-1]):
        admit = admits.get(ref, 1.0)
        node = (
            branch(ref)
            if admit >= 1.0
            else Draw(1.0, (admit,), (branch(ref), node), "spill", owner)
        )
    return node


def spilled(
    path: list[Taken], owner: Any, admits: Mapping[str, float], refs: Sequence[str]
) -> list[str]:
    """The explanation of the spill draws `path` took at this plan level."""
    draws = [value for node, value in path if node.owner is owner and node.kind == "spill"]
    full = [ref for ref in refs[:-1] if admits.get(ref, 1.0) < 1.0]
    reasons = []
    for ref, draw in zip(full, draws, strict=False):
        admit = admits[ref]
        went = ref if draw < admit else "the next pool"
        reasons.append(
            f"waterfall: {ref} is full, takes {admit:.0%} of what reaches it: "
            f"draw {draw:.3f} -> {went}"
        )
    return reasons


def load_status(pool: Pool, view: HealthView) -> dict[str, float] | None:
    """The status document's `load` of a pool with a capacity: how full it is."""
    if pool.capacity is None:
        return None
    rate, admit = view.pool_load.get(pool.name, 0.0), view.pool_admit.get(pool.name, 1.0)
    return {
        "capacity": pool.capacity,
        "answers_per_s": rate,
        "ratio": rate / pool.capacity,
        "admit": admit,
    }
