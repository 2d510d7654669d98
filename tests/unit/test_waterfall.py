"""The capacity waterfall (docs/steering.md, capacity waterfall): the keys checked, the
meter's rule (the share a full pool takes from the load it measured), and the decision
spilling what a full pool does not take to the next pool in order (seeded draws)."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from types import MappingProxyType

import pytest

from dnsd.config.loader import check_directory
from dnsd.health.store import HealthStore
from dnsd.health.view import view_of
from dnsd.serve.pool_load import PoolLoad, per_pool, shares
from dnsd.snapshot import SnapshotHolder
from dnsd.steering import SteeringInputs, steer
from dnsd.steering.waterfall import load_status
from tests.builders import lb
from tests.unit.test_config_check import HEADER, write
from tests.unit.test_steering import ADDRESS, CLIENT, NOW, POOLS, snapshot

Z999 = 3.2905

# (capacity, answers in 10 s, mean share admitted meanwhile, load /s, next share)
METER_TABLE = [
    (100.0, 3000, 1.0, 300.0, 1 / 3),  # 300/s offered to a pool of 100/s: a third
    (100.0, 1000, 1 / 3, 100.0, 1 / 3),  # steady: the same share again
    (100.0, 500, 1.0, 50.0, 1.0),  # room to spare: everything
    (100.0, 500, 0.5, 50.0, 1.0),  # 100/s offered: exactly full, everything
    (100.0, 0, 0.2, 0.0, 1.0),  # no demand any more
]


@pytest.mark.parametrize(("capacity", "answered", "admitted", "load", "share"), METER_TABLE)
def test_the_share_a_full_pool_takes(capacity, answered, admitted, load, share) -> None:
    got_load, got_share = shares({"p1": capacity}, {"p1": answered}, 10.0, {"p1": admitted})
    assert got_load["p1"] == pytest.approx(load)
    assert got_share["p1"] == pytest.approx(share)


def test_answers_are_counted_per_pool_over_load_balancers_and_regions() -> None:
    counts = {("a", "p1", "WEU"): 3, ("b", "p1", "-"): 4, ("a", "p2", "WEU"): 1}
    assert per_pool(counts) == {"p1": 7, "p2": 1}


def spread(admit: dict[str, float], n: int = 4000, trickle: float = 0.0) -> dict[str, int]:
    balancer = replace(lb("w", ["p1", "p2", "p3"], trickle=trickle), overflow="waterfall")
    snap = snapshot(POOLS, [balancer])
    healthy = view_of({(p, f"{p}-1"): True for p in ADDRESS})
    view = replace(healthy, pool_admit=MappingProxyType(admit))
    rng, counts = random.Random(11), dict[str, int]()
    for _ in range(n):
        decision = steer(SteeringInputs(snap, view, CLIENT, rng, NOW), balancer, 1)
        counts[decision.pool] = counts.get(decision.pool, 0) + 1
    return counts


def within(hits: int, n: int, p: float) -> bool:
    half = Z999 * math.sqrt(p * (1 - p) / n)
    return p - half <= hits / n <= p + half


def test_a_full_pool_spills_to_the_next_in_order() -> None:
    counts = spread({"p1": 1 / 3})
    assert set(counts) == {"p1", "p2"}  # p2 has room: nothing reaches p3
    assert within(counts["p1"], 4000, 1 / 3), counts


def test_two_full_pools_spill_on_and_the_last_takes_the_rest() -> None:
    counts = spread({"p1": 0.5, "p2": 0.5, "p3": 0.1})
    assert within(counts["p1"], 4000, 0.5) and within(counts["p2"], 4000, 0.25), counts
    assert within(counts["p3"], 4000, 0.25), counts  # the last one: everything left


def test_no_capacity_reached_is_the_order_alone() -> None:
    assert spread({"p1": 1.0}, n=300) == {"p1": 300}


def test_explain_says_which_pool_was_full() -> None:
    balancer = replace(lb("w", ["p1", "p2"]), overflow="waterfall")
    snap = snapshot(POOLS, [balancer])
    view = replace(view_of({}), pool_admit=MappingProxyType({"p1": 0.0}))
    decision = steer(SteeringInputs(snap, view, CLIENT, random.Random(1), NOW), balancer, 1)
    assert decision.pool == "p2"
    assert "waterfall: p1 is full, takes 0% of what reaches it" in " ".join(decision.trail())
    assert decision.not_chosen["p1"].startswith("full: takes 0%")


LB = """\
  w: {lb: web}
pools:
  a: {backends: [{name: a1, address: 192.0.2.10}]}
  b: {backends: [{name: b1, address: 192.0.2.11}]}
load_balancers:
  web: {default_pools: [a, b], overflow: waterfall}
"""


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("a: {", "a: {capacity: 100, "), None),
        (("a: {", "a: {capacity: 0, "), "pools.a.capacity: must be"),
        (("a: {", "a: {capacity: lots, "), "pools.a.capacity: expected a number"),
        (("overflow: waterfall", "overflow: cascade"), "'cascade' is not one of waterfall"),
        (("", ""), "overflow: waterfall, but none of its pools has a capacity: nothing spills"),
    ],
)
def test_the_keys_are_checked(tmp_path, change, expected) -> None:
    text = HEADER + LB.replace(*change)
    reasons = [str(r) for r in check_directory(write(tmp_path, z=text)) if not r.warning]
    warnings = [str(r) for r in check_directory(write(tmp_path, z=text)) if r.warning]
    if change == ("", ""):
        assert any(expected in w for w in warnings), warnings
        return
    if expected is None:
        assert reasons == []
    else:
        assert any(expected in r for r in reasons), reasons


def test_the_meter_settles_a_steady_load_and_publishes_generations_only() -> None:
    """300 answers/s offered to a pool of capacity 100: the share it takes settles at a
    third, its load at 100/s, the view's states generation never moves."""
    first = replace(POOLS[0], capacity=100.0)
    balancer = replace(lb("w", ["p1", "p2"]), overflow="waterfall")
    holder = SnapshotHolder(snapshot([first, *POOLS[1:]], [balancer]))
    store, clock, total = HealthStore(), [0.0], {"p1": 0.0}

    def counts() -> dict[tuple[str, str, str], int]:
        return {("w", "p1", "-"): int(total["p1"])}

    meter = PoolLoad(holder, store, counts, clock=lambda: clock[0])
    states = store.view.states_generation
    for _ in range(15):
        meter.tick()
        clock[0] += 1.0
        total["p1"] += 300 * store.view.pool_admit.get("p1", 1.0)  # what reached p1 took
    assert store.view.pool_admit["p1"] == pytest.approx(1 / 3, rel=0.02)
    assert store.view.pool_load["p1"] == pytest.approx(100, rel=0.05)
    assert store.view.states_generation == states
    [family] = meter.collect()
    assert [s.value for s in family.samples] == [pytest.approx(1.0, rel=0.05)]
    assert load_status(first, store.view)["ratio"] == pytest.approx(1.0, rel=0.05)
