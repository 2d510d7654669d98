"""Several pools per answer (docs/steering.md, several pools per answer).

With `answer_pools: N` a load balancer answers with one address from each of the first N
pools, in the order steering chose for this query (the drawn or trickled pool first, then
the others in policy order), that have an address of the asked family. With `distinct`, a
pool is skipped when its label is already in the answer: its `region` or `domain`, or for
`zone` each backend's zone (a pool whose every eligible backend sits in a zone already in
the answer is skipped; otherwise its address comes from the zones not yet there).

Each pool's address is one weighted draw (`draws.Draw`) among its modified eligible
backends, or the subnet's rendezvous pick with `selection: hash`; the draws are chained,
pool after pool, so both serving loops walk them like any other. Past `MAX_COMBINATIONS`
possible answers every pool's address is the rendezvous pick for the client's subnet
instead (no draws), which keeps the tree and its answer table small.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dnsd.config.model import Backend, LoadBalancer, Pool
from dnsd.steering.draws import Draw, Node, Outcome, weighted_draw
from dnsd.steering.pick import hashed

MAX_COMBINATIONS = 1024


@dataclass(frozen=True, slots=True)
class PoolChoice:
    """One pool in the order steering chose: its name, the pool and the modified eligible
    backends of the asked family (`select.PoolPlan.matching`), and who owns its draw."""

    ref: str
    pool: Pool
    matching: Sequence[Backend]
    owner: object = None


Used = frozenset[str]  # the labels already in the answer
Leaf = Callable[[tuple[str, ...], tuple[str, ...]], Outcome]  # (addresses, pools) → outcome


def label(distinct: str | None, pool: Pool, backend: Backend) -> str | None:
    """What `distinct` compares for one backend of a pool (None: nothing to compare)."""
    if distinct == "region":
        return pool.region
    if distinct == "domain":
        return pool.domain
    if distinct == "zone":
        return backend.zone
    return None


def answer_pools_node(
    lb: LoadBalancer, order: Sequence[PoolChoice], subnet: bytes, leaf: Leaf
) -> Node | None:
    """The draws answering with one address from each of the first `lb.answer_pools`
    pools of `order`; None when no pool has an address of the asked family (the first
    pool's ordinary answer then: a CNAME or NODATA)."""
    usable = [choice for choice in order if choice.matching]
    if not usable:
        return None
    sizes = sorted((len(c.matching) for c in usable), reverse=True)[: lb.answer_pools]
    by_hash = lb.selection == "hash" or math.prod(sizes) > MAX_COMBINATIONS
    want, distinct = lb.answer_pools, lb.distinct

    def step(i: int, addresses: tuple[str, ...], pools: tuple[str, ...], used: Used) -> Node:
        if len(pools) < want:
            for j in range(i, len(usable)):
                choice = usable[j]
                allowed = [
                    b for b in choice.matching if label(distinct, choice.pool, b) not in used
                ]
                if not allowed:
                    continue  # everything it could answer with is already in the answer

                def then(
                    b: Backend, j: int = j, ref: str = choice.ref, pool: Pool = choice.pool
                ) -> Node:
                    mark = label(distinct, pool, b)
                    marks = used if mark is None else used | {mark}
                    return step(j + 1, (*addresses, b.address_text), (*pools, ref), marks)

                if len(allowed) == 1 or by_hash:
                    return then(hashed(allowed, subnet)[0])
                scale, thresholds, items = weighted_draw([b.weight for b in allowed])
                nodes = {k: then(allowed[k]) for k in set(items)}
                branches = tuple(nodes[k] for k in items)
                return Draw(scale, thresholds, branches, "answer", choice.owner)
        return leaf(addresses, pools)

    return step(0, (), (), frozenset())


def skipped(lb: LoadBalancer, order: Sequence[PoolChoice], outcome: Outcome) -> dict[str, str]:
    """Why each pool of `order` before the last one in the answer was left out of it (for
    `dnsd explain`), from the addresses the walk chose."""
    why: dict[str, str] = {}
    chosen = dict(zip(outcome.pools, outcome.addresses, strict=False))
    if not chosen:
        return why
    used: set[str] = set()
    for choice in order:
        if choice.ref in chosen:
            for b in choice.matching:
                mark = label(lb.distinct, choice.pool, b)
                if b.address_text == chosen[choice.ref] and mark is not None:
                    used.add(mark)
            if choice.ref == outcome.pools[-1]:
                break
        elif not choice.matching:
            why[choice.ref] = "answer_pools: no address of the asked family"
        else:
            marks = sorted({str(label(lb.distinct, choice.pool, b)) for b in choice.matching})
            why[choice.ref] = f"distinct {lb.distinct}: {', '.join(marks)} already in the answer"
    return why
