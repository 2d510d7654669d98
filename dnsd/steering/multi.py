"""Several pools per answer (docs/steering.md, several pools per answer).

With `answer_pools: N` a load balancer answers with one address from each of the first N
pools, in the order steering chose for this query (the drawn or trickled pool first, then
the others in policy order), that have an address of the asked family. With `distinct`, a
pool is skipped when its label is already in the answer: its `region` or `domain`, or for
`zone` each backend's zone (a pool whose every eligible backend sits in a zone already in
the answer is skipped; otherwise its address comes from the zones not yet there).

Each pool's address is a weighted pick (backend `weight`) among its modified eligible
backends, or the subnet's rendezvous pick with `selection: hash`. The picks are made as one
`draws.Draw` over every possible answer, each with the product of its picks' chances — one
random number per query however many pools answer, walked by both serving loops like any
other draw. Past `MAX_COMBINATIONS` possible answers every pool's address is the rendezvous
pick for the client's subnet instead (no draw), which keeps the draw and its answer table
small.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dnsd.config.model import Backend, LoadBalancer, Pool
from dnsd.steering.draws import Draw, Node, Outcome, weighted_draw
from dnsd.steering.pick import hashed

MAX_COMBINATIONS = 1024
Used = frozenset[str]  # the labels already in the answer
Texts = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PoolChoice:
    """One pool in the order steering chose: its name, the pool and the modified eligible
    backends of the asked family (`plan.PoolPlan.matching`), and who owns its draw."""

    ref: str
    pool: Pool
    matching: Sequence[Backend]
    owner: object = None


# (addresses, pools, an HTTPS/SVCB answer's IPv6 hints or None) → outcome
Leaf = Callable[[Texts, Texts, Texts | None], Outcome]
Combos = list[tuple[float, Texts, Texts]]  # (chance, addresses, pools) of each answer


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
    lb: LoadBalancer,
    order: Sequence[PoolChoice],
    subnet: bytes,
    leaf: Leaf,
    order6: Sequence[PoolChoice] | None = None,
) -> Node | None:
    """The draw answering with one address from each of the first `lb.answer_pools`
    pools of `order`; None when no pool has an address of the asked family (the first
    pool's ordinary answer then: a CNAME or NODATA). `order6`: an HTTPS/SVCB answer's
    IPv6 hints, chosen the same way from the same pools (`order` holds the IPv4 ones)."""
    usable = [choice for choice in order if choice.matching]
    usable6 = [choice for choice in order6 or () if choice.matching]
    if not usable and not usable6:
        return None
    combos = _combos(lb, usable, subnet) if usable else [(1.0, (), ())]
    combos6 = _combos(lb, usable6, subnet) if usable6 else [(1.0, (), ())]
    answers = [
        (chance * chance6, addresses, pools, addresses6 if order6 is not None else None)
        for chance, addresses, pools in combos
        for chance6, addresses6, _ in combos6
    ]
    if len(answers) == 1:
        return leaf(*answers[0][1:])
    # one draw over every possible answer (the product of each pool's chances): one random
    # number per query, however many pools answer
    scale, thresholds, items = weighted_draw([answer[0] for answer in answers])
    leaves = {i: leaf(*answers[i][1:]) for i in set(items)}
    owner = (usable or usable6)[0].owner
    return Draw(scale, thresholds, tuple(leaves[i] for i in items), "answer", owner)


def _combos(lb: LoadBalancer, usable: Sequence[PoolChoice], subnet: bytes) -> Combos:
    """Every answer one address from each of the first N pools can give, with its chance."""
    sizes = sorted((len(c.matching) for c in usable), reverse=True)[: lb.answer_pools]
    by_hash = lb.selection == "hash" or math.prod(sizes) > MAX_COMBINATIONS
    walk = _ComboWalk(usable, lb.answer_pools, lb.distinct, by_hash, subnet)
    walk.step(0, 1.0, (), (), frozenset())
    return walk.answers


class _ComboWalk:
    """_combos' depth-first walk (a class: a closure calling itself is a reference cycle,
    kept with what it holds until a full collection)."""

    __slots__ = ("answers", "by_hash", "distinct", "subnet", "usable", "want")

    def __init__(
        self,
        usable: Sequence[PoolChoice],
        want: int,
        distinct: str | None,
        by_hash: bool,
        subnet: bytes,
    ) -> None:
        self.usable, self.want, self.distinct = usable, want, distinct
        self.by_hash, self.subnet = by_hash, subnet
        self.answers: Combos = []

    def step(self, i: int, chance: float, addresses: Texts, pools: Texts, used: Used) -> None:
        usable, distinct = self.usable, self.distinct
        for j in range(i, len(usable) if len(pools) < self.want else i):
            choice = usable[j]
            allowed = [b for b in choice.matching if label(distinct, choice.pool, b) not in used]
            if not allowed:
                continue  # everything it could answer with is already in the answer
            picks = [(1.0, hashed(allowed, self.subnet)[0])] if self.by_hash else _chances(allowed)
            for p, b in picks:
                mark = label(distinct, choice.pool, b)
                marks = used if mark is None else used | {mark}
                self.step(
                    j + 1, chance * p, (*addresses, b.address_text), (*pools, choice.ref), marks
                )
            return
        self.answers.append((chance, addresses, pools))


def _chances(backends: list[Backend]) -> list[tuple[float, Backend]]:
    """Each backend's chance in one weighted pick (`draws.weighted_draw`'s rule: weight 0
    only when nothing has a weight, then uniformly); backends without a chance left out."""
    total = float(sum(b.weight for b in backends if b.weight > 0))
    if total <= 0:
        return [(1.0 / len(backends), b) for b in backends]
    return [(b.weight / total, b) for b in backends if b.weight > 0]


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
