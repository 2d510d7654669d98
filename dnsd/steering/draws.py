"""The one draw structure: what a steering plan can still decide per query.

`select.compile_plan` turns a plan into a tree whose inner nodes are draws and whose
leaves are `Outcome`s. `walk` makes the draws with a random source and returns the leaf.
The full path walks it; `explain` walks the same tree with a `path` list and rebuilds its
reasons from the draws taken, so an explanation cannot disagree with an answer. For
repeated queries the answer cache compiles the tree into an answer table
(dnsd.answer_table): the same draws, flattened, walked by both serving loops;
tests/property/test_answer_table.py holds the table walks to this one, draw for draw.

* `Draw` — one `rng.random()`: a ramp's share (the new choice or the pool left), the
  trickle (backup or primary), a full pool's share (it, or on to the next: the capacity
  waterfall), the `random` policy's pool,
  one address out of several (`max_answers: 1`).
* `Sample` — several draws: the first `take` of a weighted random order (`max_answers` > 1).

Weighted picks use one rule everywhere, written once here: `weighted_draw` makes a pick's
thresholds (P(i) = w_i / Σw; weight 0 is picked only when nothing with a weight is left,
then uniformly), `branch_at` picks with one draw, `draw_order` makes a Sample's picks.
The compiled walk (dnsd/_fastloop.c, `walk_table`) mirrors `branch_at` and `draw_order`;
tests/property/test_draw_rule.py holds the mirror to them, seed for seed.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

DrawKind = Literal["pool", "trickle", "answer", "ramp", "spill"]
MAX_LEAVES = 64  # distinct orders a Sample remembers (its Outcomes are reused by identity)


@dataclass(frozen=True, slots=True, eq=False)
class Outcome:
    """Where the draws end: the answer and how it was reached. Leaves are compared by
    identity (the answer cache keys finished replies by them); `answer()` is the value."""

    addresses: tuple[str, ...]
    cname: str | None
    pool: str | None  # the innermost entry chosen
    fail_open: bool  # nothing healthy somewhere on the route: the fallback answered
    scope: int  # the widest ECS scope prefix the answer depended on
    route: tuple[str, ...]  # the entry chosen at each nesting level, outermost first
    # docs/steering.md, when all pools are down: the rule that answered (closed, servfail,
    # all, last_good) when no pool did; None when a pool answered (the fallback rule too)
    all_down: str | None = None
    # docs/steering.md, several pools per answer: the pools the addresses came from, in
    # order (empty: one pool answered, the usual case)
    pools: tuple[str, ...] = ()
    # docs/steering.md, HTTPS and SVCB hints: the IPv6 addresses drawn beside `addresses`
    # (the IPv4 ones) for one HTTPS/SVCB answer; None for an A or AAAA answer
    hints6: tuple[str, ...] | None = None

    def answer(self) -> tuple[tuple[str, ...], str | None, str | None, bool, int]:
        return self.addresses, self.cname, self.pool, self.fail_open, self.scope


@dataclass(frozen=True, slots=True, eq=False)
class Draw:
    """One `rng.random()`, scaled by `scale`: the first threshold above it picks the branch
    (`branches` has one more entry than `thresholds`: the last is "none above")."""

    scale: float
    thresholds: tuple[float, ...]
    branches: tuple[Node, ...]
    kind: DrawKind
    owner: Any = None  # the plan level the draw belongs to (for explain)


@dataclass(frozen=True, slots=True, eq=False)
class Sample:
    """The first `take` of a weighted random order of len(weights) items, one draw each."""

    weights: tuple[float, ...]
    take: int
    leaf: Callable[[tuple[int, ...]], Node]  # an Outcome, or an HTTPS answer's IPv6 draws
    owner: Any = None
    kind: DrawKind = "answer"
    leaves: dict[tuple[int, ...], Node] = field(default_factory=dict)

    def pick(self, rng: random.Random, path: list[Taken] | None) -> Node:
        key = draw_order(self.weights, self.take, rng)
        if path is not None:
            path.append((self, key))
        return self.outcome(key)

    def outcome(self, key: tuple[int, ...]) -> Node:
        """The leaf of the order `key` (the same object each time it is drawn)."""
        outcome = self.leaves.get(key)
        if outcome is None:
            outcome = self.leaf(key)
            if len(self.leaves) < MAX_LEAVES:  # bounded: many backends have many orders
                self.leaves[key] = outcome
        return outcome


Node = Draw | Sample | Outcome
Taken = tuple[Draw | Sample, Any]  # a draw node and its raw draw (or the order a Sample drew)


def weighted_draw(weights: Sequence[float]) -> tuple[float, tuple[float, ...], list[int]]:
    """One weighted pick as (scale, thresholds, item per branch) for a `Draw`."""
    total = float(sum(weights))
    if total <= 0:  # only zero weights: uniformly
        n = len(weights)
        return float(n), tuple(float(i) for i in range(1, n)), list(range(n))
    thresholds, items, running = [], [], 0.0
    for i, weight in enumerate(weights):
        if weight > 0:  # the first running total above the point
            running += weight
            thresholds.append(running)
            items.append(i)
    return running, tuple(thresholds), [*items, items[-1]]


def branch_at(thresholds: Sequence[float], scale: float, r: float) -> int:
    """The draw rule: the branch of the first threshold above `r` × `scale` (the last
    branch when none is above)."""
    return bisect_right(thresholds, r * scale)


def draw_order(weights: Sequence[float], take: int, rng: random.Random) -> tuple[int, ...]:
    """The first `take` of a weighted random order of len(weights) items: `take` weighted
    picks without replacement, one rng.random() each."""
    remaining = list(range(len(weights)))
    chosen = []
    for _ in range(take):
        scale, thresholds, picks = weighted_draw([weights[i] for i in remaining])
        chosen.append(remaining.pop(picks[branch_at(thresholds, scale, rng.random())]))
    return tuple(chosen)


def walk(node: Node, rng: random.Random, path: list[Taken] | None = None) -> Outcome:
    """The outcome the next draws of `rng` lead to; `path` (when given) records them."""
    while True:
        cls = node.__class__
        if cls is Draw:
            draw: Draw = node  # type: ignore[assignment]
            r = rng.random()
            if path is not None:
                path.append((draw, r))
            node = draw.branches[branch_at(draw.thresholds, draw.scale, r)]
        elif cls is Sample:
            node = node.pick(rng, path)  # type: ignore[union-attr]
        else:
            return node  # type: ignore[return-value]
