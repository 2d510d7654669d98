"""The draw rule is written once in Python (dnsd.steering.draws: `weighted_draw`, `branch_at`,
`draw_order`) and mirrored once in C (dnsd/_fastloop.c, `walk_table`). This property is the
link: for generated weights — zero weights, one weighted item among zeros, wide ranges —
the same seed gives the same picks from the Python rule, from a `Sample` or `Draw` node
walked by `draws.walk`, from the Python table walk and from the compiled one, and each
leaves the random stream at the same place.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

import dnsd._fastloop as fastloop
from dnsd import answer_table
from dnsd.answer_table import NEW_ORDER, NOT_CACHED
from dnsd.steering.draws import (
    Draw,
    Outcome,
    Sample,
    branch_at,
    draw_order,
    walk,
    weighted_draw,
)
from tests.tiers import examples

weight = st.one_of(
    st.just(0.0),
    st.integers(1, 5).map(float),
    st.floats(1e-6, 1e6, allow_nan=False, allow_infinity=False),
)
weights = st.lists(weight, min_size=1, max_size=40)


def leaf(order: tuple[int, ...]) -> Outcome:
    return Outcome(tuple(f"192.0.2.{i}" for i in order), None, "p", False, 0, ())


@settings(max_examples=examples(3000), deadline=None, database=None)
@given(weights=weights, data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_a_sample_draws_the_same_order_everywhere(weights, data, seed) -> None:
    take = data.draw(st.integers(1, len(weights)))
    rule = random.Random(seed)
    expected = draw_order(weights, take, rule)

    sample = Sample(tuple(weights), take, leaf)
    node_rng = random.Random(seed)
    assert walk(sample, node_rng).addresses == leaf(expected).addresses

    # a fresh node: no order known (the walk above remembered one), so each walk says
    table = answer_table.build(Sample(tuple(weights), take, leaf), {}, b"", 0).table
    for walker in (answer_table.walk, fastloop.walk):
        rng = random.Random(seed)
        code, _, order = walker(table, b"", rng)
        assert (code, order) == (NEW_ORDER, expected)
        assert rng.random() == rule.random() == node_rng.random()  # the same draws used
        rule, node_rng = random.Random(seed), random.Random(seed)
        draw_order(weights, take, rule)
        walk(sample, node_rng)


@settings(max_examples=examples(3000), deadline=None, database=None)
@given(weights=weights, seed=st.integers(0, 2**32 - 1))
def test_a_draw_picks_the_same_branch_everywhere(weights, seed) -> None:
    scale, thresholds, items = weighted_draw(weights)
    leaves = [leaf((i,)) for i in range(len(weights))]
    draw = Draw(scale, thresholds, tuple(leaves[i] for i in items), "answer")
    expected = items[branch_at(thresholds, scale, random.Random(seed).random())]
    assert weights[expected] > 0 or not any(w > 0 for w in weights)
    assert walk(draw, random.Random(seed)) is leaves[expected]

    built = answer_table.build(draw, {}, b"", 0)
    for walker in (answer_table.walk, fastloop.walk):
        code, leaf_id, _ = walker(built.table, b"", random.Random(seed))
        assert code == NOT_CACHED and built.outcomes[leaf_id] is leaves[expected]
