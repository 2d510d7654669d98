"""Transferred load-balanced answers are kept per name and a new health view recomputes only
the names it can change (a health change re-steered every name). Over random
sequences of view changes — verdicts, drains, pool overrides, trickle overrides, RTT-only
updates — the incremental answers equal a full computation every time."""

from __future__ import annotations

import random
from pathlib import Path
from types import MappingProxyType

from dnsd.health.view import BackendHealth, RttSample, health_change, view_of
from dnsd.loading import load_snapshot
from dnsd.xfr.lb_answers import LbAnswers
from tests.tiers import examples

POOLS = ["a", "b", "c", "d"]
NOW = 1_000_000.0


def config(tmp_path: Path) -> Path:
    lines = [
        "zone: inc.test",
        "soa: {mname: ns1.inc.test., rname: h.inc.test.}",
        "records:",
        '  "@": {NS: ns1.inc.test.}',
        "  ns1: {A: 192.0.2.1}",
    ]
    lbs = ["load_balancers:"]
    policies = ["off", "dynamic", "geo", "random"]
    for i in range(60):
        lines.append(f"  n{i}: {{lb: l{i}}}")
        first, second = POOLS[i % 4], POOLS[(i + 1) % 4]
        extra = ", fallback_pool: d" if i % 3 == 0 else ""
        trickle = ", trickle_ratio: 0.3" if i % 5 == 0 and policies[i % 4] != "random" else ""
        lbs.append(f"  l{i}: {{steering: {policies[i % 4]}, default_pools: [{first}, {second}]"
                   f"{extra}{trickle}, min_samples: 1}}")  # fmt: skip
    lines.append("  nest: {lb: outer}")
    lbs.append("  outer: {default_pools: ['lb:l1', c]}")
    pools = ["pools:"]
    for n, name in enumerate(POOLS):
        backends = ", ".join(
            f"{{name: {name}{k}, address: 192.0.2.{10 * n + k}}}" for k in range(2)
        )
        pools.append(f"  {name}: {{backends: [{backends}]}}")
    (tmp_path / "inc.test.yaml").write_text("\n".join([*lines, *pools, *lbs]) + "\n")
    return tmp_path


def random_view(rng: random.Random, last, generation: int):
    states = dict(last.backends)
    pools, trickle = dict(last.pool_overrides), dict(last.trickle_overrides)
    kind = rng.choice(["verdict", "drain", "pool", "trickle", "rtt", "rtt"])
    pool = rng.choice(POOLS)
    key = (pool, f"{pool}{rng.randrange(2)}")
    old = states.get(key, BackendHealth(healthy=True, probed="healthy"))
    if kind == "verdict":
        healthy = not old.healthy
        states[key] = BackendHealth(
            healthy, "healthy" if healthy else "unhealthy", old.override, old.rtt
        )
    elif kind == "drain":
        states[key] = BackendHealth(
            old.healthy, old.probed, None if old.override else "drain", old.rtt
        )
    elif kind == "pool":
        pools[pool] = rng.choice(["down", "up"]) if pool not in pools else pools.pop(pool)
        pools = {k: v for k, v in pools.items() if isinstance(v, str)}
    elif kind == "trickle":
        trickle[f"l{rng.randrange(60)}"] = rng.choice([0.0, 0.5, 1.0])
    else:
        rtt = MappingProxyType({"local": RttSample(rng.uniform(1, 100), 5, NOW)})
        states[key] = BackendHealth(old.healthy, old.probed, old.override, rtt)
    view = view_of(states, pools=pools, trickle=trickle, generation=generation)
    return view, kind


def test_incremental_answers_equal_a_full_computation(tmp_path: Path) -> None:
    snap = load_snapshot(config(tmp_path), 1)
    zone = snap.zones["inc.test."] if "inc.test." in snap.zones else snap.zones["inc.test"]
    rng = random.Random(20261201)
    view = view_of({(p, f"{p}{k}"): True for p in POOLS for k in range(2)})
    answers = LbAnswers.compute(snap, view, zone, NOW)
    index = snap.lb_graph
    recomputed = []
    for generation in range(2, examples(400)):
        new, kind = random_view(rng, view, generation)
        change = health_change(view, new)
        dirty = index.reached_classes(change.pools, change.rtt_pools, change.lbs)
        answers = answers.updated(snap, new, zone, NOW)
        full = LbAnswers.compute(snap, new, zone, NOW)
        assert {lb: answers.answer(lb) for lb in full.zone.owners} == {
            lb: full.answer(lb) for lb in full.zone.owners
        }, kind
        assert answers.total == full.total and list(answers) == list(full)
        assert len(answers) == len(full) == sum(len(r) for r in full)
        recomputed.append(len(dirty))
        view = new
    # A change steers the classes of load balancers using that pool again, not all 61
    # load balancers (16 classes here: 4 policies × 4 pool pairs, with and without extras).
    assert len(set(index.classes.values())) < 40
    assert max(recomputed) < len(set(index.classes.values())) and min(recomputed) <= 2
