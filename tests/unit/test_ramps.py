"""Ramps (docs/steering.md, ramps): the key validated, the share in force at each time (a
seeded table), the decision drawing that share between the new first choice and the
healthy pool left, and when a change starts, keeps or ends a ramp."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from types import MappingProxyType

import pytest

from dnsd.config.loader import check_directory
from dnsd.config.model import Ramp
from dnsd.events import EventLog
from dnsd.health.store import HealthStore
from dnsd.health.view import RampStart, TrickleRamp, view_of
from dnsd.serve.ramps import RampWatch, first_choices, next_ramps, next_trickle_ramps
from dnsd.snapshot import SnapshotHolder
from dnsd.steering import SteeringInputs, steer
from dnsd.steering.ramp import in_force, ramp_status, share_at, step_at, step_ends
from dnsd.steering.select import build_plan
from tests.builders import lb
from tests.unit.test_config_check import HEADER, write
from tests.unit.test_steering import ADDRESS, CLIENT, DYN, NOW, POOLS, rtt_view, snapshot

RAMP = Ramp(duration_s=10.0, steps=5)
Z999 = 3.2905  # two-sided 99.9 %


def within(hits: int, n: int, p: float) -> bool:
    """`hits` of `n` is inside the binomial 99.9 % interval around `p`."""
    half = Z999 * math.sqrt(p * (1 - p) / n)
    return p - half <= hits / n <= p + half


# (seconds since the start, step in force, share to the new choice, when it changes next)
SHARE_TABLE = [
    (-0.5, None, 1.0, math.inf),  # not started (a clock behind): no ramp
    (0.0, 1, 0.2, 2.0),
    (1.999, 1, 0.2, 2.0),
    (2.0, 2, 0.4, 4.0),
    (5.0, 3, 0.6, 6.0),
    (7.999, 4, 0.8, 8.0),
    (8.0, None, 1.0, math.inf),  # the last step is the whole move: over
    (60.0, None, 1.0, math.inf),
]


@pytest.mark.parametrize(("after", "step", "share", "ends"), SHARE_TABLE)
def test_share_in_force(after, step, share, ends) -> None:
    start = 1000.0
    assert step_at(RAMP, start, start + after) == step
    assert share_at(RAMP, start, start + after) == pytest.approx(share)
    assert step_ends(RAMP, start, start + after) == pytest.approx(ends + start)


def ramped(start_s: float, from_ref: str, to_ref: str, down=(), pools=None, trickle=None):
    states = {(p, f"{p}-1"): p not in down for p in ADDRESS}
    view = view_of(states, pools=pools, trickle=trickle)
    ramps = {("w", ""): RampStart(start_s, from_ref, to_ref)}
    return replace(view, ramps=MappingProxyType(ramps))


def balancer(**kw):
    return replace(lb("w", ["p1", "p2"], **kw), ramp=RAMP)


def shares(view, n: int = 4000, seed: int = 7, lbs=None) -> dict[str, int]:
    lbs = lbs or [balancer()]
    snap = snapshot(POOLS, lbs)
    rng, counts = random.Random(seed), dict[str, int]()
    for _ in range(n):
        inputs = SteeringInputs(snap, view, CLIENT, rng, NOW)
        pool = steer(inputs, snap.config.load_balancers["w"], 1).innermost().pool
        counts[pool] = counts.get(pool, 0) + 1
    return counts


@pytest.mark.parametrize(("after", "share"), [(0.5, 0.2), (3.0, 0.4), (4.0, 0.6), (7.5, 0.8)])
def test_failback_shares_are_the_step_in_force(after, share) -> None:
    counts = shares(ramped(NOW - after, "p2", "p1"))
    assert set(counts) == {"p1", "p2"}
    assert within(counts["p1"], 4000, share), counts


def test_after_the_last_step_everything_moved() -> None:
    assert shares(ramped(NOW - 8.0, "p2", "p1"), n=500) == {"p1": 500}


def test_leaving_an_unhealthy_pool_is_never_ramped() -> None:
    assert shares(ramped(NOW - 1, "p2", "p1", down={"p2"}), n=500) == {"p1": 500}


def test_a_ramp_to_another_pool_than_the_first_choice_is_not_in_force() -> None:
    assert shares(ramped(NOW - 1, "p1", "p2"), n=500) == {"p1": 500}


def test_a_drained_pool_is_left_in_steps() -> None:
    """A pool override `down` on a healthy pool: its share falls step by step."""
    counts = shares(ramped(NOW - 4.5, "p1", "p2", pools={"p1": "down"}))
    assert within(counts["p2"], 4000, 0.6), counts


def test_a_manual_failover_by_trickle_is_ramped() -> None:
    counts = shares(ramped(NOW - 1, "p1", "p2", trickle={"w": 1.0}), lbs=[balancer(trickle=0.0)])
    assert within(counts["p2"], 4000, 0.2), counts


def test_explain_names_the_step_and_the_plan_ends_with_it() -> None:
    snap = snapshot(POOLS, [balancer()])
    view = ramped(NOW - 3.0, "p2", "p1")
    inputs = SteeringInputs(snap, view, CLIENT, random.Random(3), NOW)
    decision = steer(inputs, snap.config.load_balancers["w"], 1)
    trail = " ".join(decision.trail())
    assert "ramp from p2 to p1: step 2 of 5, 40% to p1" in trail
    ramp = decision.to_json()["ramp"]
    assert (ramp["from"], ramp["to"], ramp["step"], ramp["share"]) == ("p2", "p1", 2, 0.4)
    plan = build_plan(inputs, snap.config.load_balancers["w"], 1)
    assert plan.until == pytest.approx(NOW - 3.0 + 4.0)  # step 2 ends 4 s after the start
    assert [r["share"] for r in in_force(snap.config.load_balancers["w"], view.ramps, NOW)] == [0.4]


def test_a_recovery_starts_a_ramp_from_the_healthy_pool_left() -> None:
    snap = snapshot(POOLS, [balancer()])
    down = view_of({(p, f"{p}-1"): p != "p1" for p in ADDRESS})
    up = view_of({(p, f"{p}-1"): True for p in ADDRESS})
    before, after = first_choices(snap, down, NOW), first_choices(snap, up, NOW)
    assert before[("w", "")] == "p2" and after[("w", "")] == "p1"
    ramps, started = next_ramps(snap, up, before, after, NOW)
    assert ramps[("w", "")] == RampStart(NOW, "p2", "p1") and ("w", "") in started
    # the first failure is a move away from an unhealthy pool: no ramp
    ramps, started = next_ramps(snap, down, after, before, NOW)
    assert ramps == {} and started == []


def test_a_ramp_ends_when_its_pool_left_fails_or_its_time_is_over() -> None:
    snap = snapshot(POOLS, [balancer()])
    firsts = {("w", ""): "p1"}
    failed = ramped(NOW - 1, "p2", "p1", down={"p2"})
    assert next_ramps(snap, failed, firsts, firsts, NOW)[0] == {}
    over = ramped(NOW - 10, "p2", "p1")
    assert next_ramps(snap, over, firsts, firsts, NOW)[0] == {}
    going = ramped(NOW - 1, "p2", "p1")
    assert next_ramps(snap, going, firsts, firsts, NOW)[0] == dict(going.ramps)


LB = """\
  w: {lb: web}
pools:
  a: {backends: [{name: a1, address: 192.0.2.10}]}
  b: {backends: [{name: b1, address: 192.0.2.11}]}
load_balancers:
"""


@pytest.mark.parametrize(
    ("ramp", "expected", "warning"),
    [
        ("{duration: 10m, steps: 5}", None, False),
        (
            "{duration: 10s, steps: 5}",
            "each of the 5 steps lasts 2 s, shorter than the ttl 30 s",
            True,
        ),
        ("{duration: 10m, steps: 1}", "one step is the whole move: no ramp", True),
        ("{duration: 10m, steps: 0}", "ramp.steps: must be between 1 and 100, got 0", False),
        ("{duration: soon, steps: 5}", "ramp.duration: expected a duration", False),
        ("{duration: 10m}", 'load_balancers.web.ramp: missing required key "steps"', False),
        (
            "{duration: 10m, steps: 5, stpes: 2}",
            'ramp.stpes: unknown key (did you mean "steps"?)',
            False,
        ),
        ("10m", "load_balancers.web.ramp: expected a mapping, got a string", False),
    ],
)
def test_the_ramp_key_is_checked(tmp_path, ramp, expected, warning) -> None:
    text = HEADER + LB + f"  web: {{ttl: 30, default_pools: [a, b], ramp: {ramp}}}\n"
    reasons = check_directory(write(tmp_path, z=text))
    if expected is None:
        assert reasons == []
        return
    found = [r for r in reasons if expected in str(r)]
    assert found, [str(r) for r in reasons]
    assert found[0].warning is warning
    assert str(found[0]).startswith("z.yaml:") or str(found[0]).split(":")[0].endswith("z.yaml")


def test_a_ramp_is_started_by_a_recovery_kept_in_the_state_dir_and_resumed(tmp_path) -> None:
    snap = snapshot(POOLS, [balancer()])
    clock = [NOW]
    store, events = HealthStore(), EventLog()
    watch = RampWatch(SnapshotHolder(snap), store, events, lambda: clock[0], tmp_path)
    for generation, p1_up in ((1, False), (2, True)):
        states = {(p, f"{p}-1"): p != "p1" or p1_up for p in ADDRESS}
        store.view = view_of(states, generation=generation)
        watch.on_view(store.view)
    assert store.view.ramps[("w", "")] == RampStart(NOW, "p2", "p1")
    assert len(store.view.ramps) == 14  # every region moved: 13 and the clients of none
    assert store.view.states_generation == 3  # a new states generation: caches rebuild plans
    [event] = [e for e in events if e.kind == "ramp"]
    assert (event.lb, event.details["from_pool"], event.details["to_pool"]) == ("w", "p2", "p1")
    watch.writer.flush()
    fresh = HealthStore()
    assert RampWatch(SnapshotHolder(snap), fresh, EventLog(), state_dir=tmp_path).load() == len(
        store.view.ramps
    )
    assert fresh.view.ramps == store.view.ramps
    (tmp_path / "ramps.json").write_text('{"version": 2}')
    assert (
        RampWatch(SnapshotHolder(snap), HealthStore(), EventLog(), state_dir=tmp_path).load() == 0
    )


def test_a_trickle_override_moves_its_ratio_in_steps() -> None:
    """A trickle ratio changed by an override (0 → 0.5) with the primary healthy: the ratio
    in force goes 0.1, 0.2, … of the answers to the backup, one step at a time."""
    snap = snapshot(POOLS, [balancer()])
    view = replace(
        view_of({(p, f"{p}-1"): True for p in ADDRESS}, trickle={"w": 0.5}),
        trickle_ramps=MappingProxyType({"w": TrickleRamp(NOW - 2.5, 0.0, 0.5)}),
    )
    counts = shares(view)
    assert within(counts["p2"], 4000, 0.2), counts  # step 2 of 5: 0.0 + 0.5 × 2/5
    inputs = SteeringInputs(snap, view, CLIENT, random.Random(3), NOW)
    assert "ramp of the trickle ratio: step 2 of 5" in " ".join(
        steer(inputs, snap.config.load_balancers["w"], 1).trail()
    )
    assert build_plan(inputs, snap.config.load_balancers["w"], 1).until == NOW - 2.5 + 4.0
    status = ramp_status(snap.config.load_balancers["w"], view, NOW)
    assert status is not None and status["trickle"]["ratio"] == pytest.approx(0.2)
    # the override changed again: the ramp to 0.5 is no longer in force
    assert shares(replace(view, trickle_overrides=MappingProxyType({"w": 0.0})), n=300) == {
        "p1": 300
    }


def test_a_trickle_change_starts_a_ramp_from_the_ratio_in_force() -> None:
    snap = snapshot(POOLS, [balancer()])
    view = replace(
        view_of({}, trickle={"w": 0.8}),
        trickle_ramps=MappingProxyType({"w": TrickleRamp(NOW - 1, 0.0, 0.5)}),
    )
    moving, started = next_trickle_ramps(snap, view, {"w": 0.5}, {"w": 0.8}, NOW)
    assert moving == {"w": TrickleRamp(NOW, 0.1, 0.8)} and started == ["w"]  # 0.1: step 1
    moving, started = next_trickle_ramps(snap, view, {"w": 0.5}, {"w": 1.0}, NOW)
    assert moving == {} and started == []  # 1.0 moves the first choice: a ramp of its own
    kept, _ = next_trickle_ramps(snap, view, {"w": 0.5}, {"w": 0.5}, NOW)
    assert kept == dict(view.trickle_ramps)


@pytest.mark.parametrize(
    ("why", "after"),
    [
        ("a drain: an override takes the healthy p1 out", {"pools": {"p1": "down"}}),
        ("a manual failover: a trickle of 1.0", {"trickle": {"w": 1.0}}),
    ],
)
def test_planned_moves_away_from_a_healthy_pool_start_ramps(why, after) -> None:
    snap = snapshot(POOLS, [balancer(trickle=0.0)])
    healthy = {(p, f"{p}-1"): True for p in ADDRESS}
    before = first_choices(snap, view_of(healthy), NOW)
    moved = view_of(healthy, **after)
    ramps, started = next_ramps(snap, moved, before, first_choices(snap, moved, NOW), NOW)
    assert ramps[("w", "")] == RampStart(NOW, "p1", "p2") and ("w", "") in started, why
    counts = shares(replace(moved, ramps=MappingProxyType(ramps)), n=2000)
    assert within(counts["p2"], 2000, 0.2), (why, counts)  # step 1 of 5


def test_a_reload_with_a_new_first_choice_starts_a_ramp() -> None:
    holder = SnapshotHolder(snapshot(POOLS, [balancer()]))
    store, events = HealthStore(), EventLog()
    watch = RampWatch(holder, store, events, lambda: NOW)
    store.view = view_of({(p, f"{p}-1"): True for p in ADDRESS})
    watch.on_view(store.view)
    assert not store.view.ramps
    holder.swap(snapshot(POOLS, [replace(balancer(), default_pools=("p2", "p1"))]))
    watch.on_view(store.view)  # a reload publishes a view: the same states, a new config
    assert store.view.ramps[("w", "")] == RampStart(NOW, "p1", "p2")
    assert [e.details["to_pool"] for e in events if e.kind == "ramp"] == ["p2"]


def test_a_dynamic_order_moved_by_rtts_alone_starts_no_ramp_later() -> None:
    holder = SnapshotHolder(snapshot(POOLS, [replace(DYN, ramp=RAMP)]))
    store = HealthStore()
    watch = RampWatch(holder, store, EventLog(), lambda: NOW)
    views = [  # (p1's RTT, p3 down, generation, states generation)
        (20.0, (), 1, 1),
        (90.0, (), 2, 1),  # new RTTs only: p2 is faster now
        (90.0, ("p3",), 3, 2),  # then a change of states that moves nothing
    ]
    for p1_ms, down, generation, states in views:
        rtts = {"p1": p1_ms, "p2": 50.0, "p3": 150.0}
        view = rtt_view(rtts, region="WEU", down=down)
        store.view = replace(view, generation=generation, states_generation=states)
        watch.on_view(store.view)
        first = first_choices(holder.current, store.view, NOW)[("w", "WEU")]
        assert first == ("p1" if p1_ms < 50 else "p2")
    assert ("w", "WEU") not in store.view.ramps
