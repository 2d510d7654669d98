"""Zonal affinity, every rule of docs/steering.md, zonal affinity."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from dnsd.affinity import select_backends
from dnsd.health.view import view_of
from tests.builders import backend, pool

ZONES = {
    "z1": "ENAM",
    "z2": "ENAM",
    "zA": "ENAM",
    "zB": "ENAM",
    "zC": "ENAM",
    "zD": "ENAM",
    "w1": "WEU",
}


def names(backends) -> list[str]:
    return sorted(b.name for b in backends)


def decide(p, down: set[str], client_zone: str | None = "z1"):
    health = view_of({(p.name, b.name): b.name not in down for b in p.backends})
    return select_backends(p, health, client_zone, ZONES)


# -- original eligible set ------------------------------------------------------------------
NO_POLICY = [backend("a1", "z1"), backend("a2", "z1"), backend("b1", "z2"), backend("b2", "z2")]
WITH_FAILOVER = [
    backend("p1", "z1"), backend("p2", "z1"), backend("p3", "z2"), backend("p4", "z2"),
    backend("f1", "z1", "failover"), backend("f2", "z2", "failover"),
]  # fmt: skip


@dataclass
class Original:
    why: str
    backends: list
    ratio: float | None
    down: set[str]
    kind: str
    eligible: list[str]
    drop: bool = False


ORIGINAL_CASES = [
    Original("no policy, some healthy", NO_POLICY, None, {"a1"}, "all healthy backends", ["a2", "b1", "b2"]),
    Original("no policy, none healthy", NO_POLICY, None, {"a1", "a2", "b1", "b2"}, "all backends", ["a1", "a2", "b1", "b2"]),
    Original("ratio 0, a primary healthy", WITH_FAILOVER, 0.0, {"p1", "p2", "p3"}, "all healthy primaries", ["p4"]),
    Original("ratio 0, no primary, failover healthy", WITH_FAILOVER, 0.0, {"p1", "p2", "p3", "p4"}, "all healthy failover backends", ["f1", "f2"]),
    Original("ratio 0.5, 1/4 < 0.5, failover healthy", WITH_FAILOVER, 0.5, {"p1", "p2", "p3"}, "all healthy failover backends", ["f1", "f2"]),
    Original("ratio 0.5, 2/4 = 0.5 not below", WITH_FAILOVER, 0.5, {"p1", "p2"}, "all healthy primaries", ["p3", "p4"]),
    Original("ratio 0.5 triggered, failover down: healthy primaries", WITH_FAILOVER, 0.5, {"p1", "p2", "p3", "f1", "f2"}, "all healthy primaries", ["p4"]),
    Original("ratio 0, one failover down, other healthy", WITH_FAILOVER, 0.0, {"p1", "p2", "p3", "p4", "f1"}, "all healthy failover backends", ["f2"]),
    Original("everything down: all primaries, never failover", WITH_FAILOVER, 0.0, {"p1", "p2", "p3", "p4", "f1", "f2"}, "all primaries", ["p1", "p2", "p3", "p4"]),
    Original("everything down, drop_traffic_if_unhealthy", WITH_FAILOVER, 0.0, {"p1", "p2", "p3", "p4", "f1", "f2"}, "none", [], drop=True),
    Original("drop flag with primaries healthy has no effect", WITH_FAILOVER, 0.0, {"f1"}, "all healthy primaries", ["p1", "p2", "p3", "p4"], drop=True),
    Original("role failover without a policy block is a policy", WITH_FAILOVER, None, {"p1", "p2", "p3", "p4"}, "all healthy failover backends", ["f1", "f2"]),
    Original("policy block, no failover backends, all down", NO_POLICY, 0.0, {"a1", "a2", "b1", "b2"}, "all primaries", ["a1", "a2", "b1", "b2"]),
]  # fmt: skip


@pytest.mark.parametrize("case", ORIGINAL_CASES, ids=lambda c: c.why)
def test_original_eligible_set(case: Original) -> None:
    p = pool("p", case.backends, failover_ratio=case.ratio, drop=case.drop)
    d = decide(p, case.down, client_zone=None)
    assert d.original_kind == case.kind
    assert names(d.original) == case.eligible
    assert names(d.modified) == case.eligible  # no compatible client: unchanged


# -- zonal match ----------------------------------------------------------------------------
def test_zonal_match_examples_from_the_spec() -> None:
    backends = [
        backend("pA", "zA"), backend("pB", "zB"),
        backend("fC", "zC", "failover"), backend("fD", "zD", "failover"),
    ]  # fmt: skip
    p = pool("p", backends, mode="STAY_WITHIN_ZONE")
    healthy_primaries = decide(p, set(), client_zone="zA")
    assert healthy_primaries.original_kind == "all healthy primaries"
    assert healthy_primaries.zonal_match and names(healthy_primaries.matched) == ["pA"]
    failover = decide(p, {"pA", "pB"}, client_zone="zA")
    assert failover.original_kind == "all healthy failover backends"
    assert not failover.zonal_match
    assert names(failover.modified) == ["fC", "fD"]


# -- modified eligible set ------------------------------------------------------------------
@dataclass
class Modified:
    why: str
    backends: list
    policy: float | None
    down: set[str]
    mode: str
    spill: float
    kind: str
    expected: list[str]


STAY, SPILL = "STAY_WITHIN_ZONE", "SPILL_CROSS_ZONE"
MODIFIED_CASES = [
    # original = all healthy backends (no policy); client in z1 (a1, a2)
    Modified("healthy/stay/I not empty", NO_POLICY, None, {"a2"}, STAY, 0.0, "all healthy backends", ["a1"]),
    Modified("healthy/stay/I empty -> M", NO_POLICY, None, {"a1", "a2"}, STAY, 0.0, "all healthy backends", ["a1", "a2"]),
    Modified("healthy/spill0/I not empty", NO_POLICY, None, {"a2"}, SPILL, 0.0, "all healthy backends", ["a1"]),
    Modified("healthy/spill0/I empty -> E", NO_POLICY, None, {"a1", "a2"}, SPILL, 0.0, "all healthy backends", ["b1", "b2"]),
    Modified("healthy/spill0.5/ratio 0.5 above", NO_POLICY, None, {"a2"}, SPILL, 0.5, "all healthy backends", ["a1"]),
    Modified("healthy/spill0.8/ratio 0.5 below -> E", NO_POLICY, None, {"a2"}, SPILL, 0.8, "all healthy backends", ["a1", "b1", "b2"]),
    Modified("healthy/spill0.5/I empty -> E", NO_POLICY, None, {"a1", "a2"}, SPILL, 0.5, "all healthy backends", ["b1", "b2"]),
    # original = all backends (no policy, nothing healthy): I = M in every mode
    Modified("all/stay", NO_POLICY, None, {"a1", "a2", "b1", "b2"}, STAY, 0.0, "all backends", ["a1", "a2"]),
    Modified("all/spill0", NO_POLICY, None, {"a1", "a2", "b1", "b2"}, SPILL, 0.0, "all backends", ["a1", "a2"]),
    Modified("all/spill0.8", NO_POLICY, None, {"a1", "a2", "b1", "b2"}, SPILL, 0.8, "all backends", ["a1", "a2"]),
    # original = all healthy primaries; test set = primaries (p1, p2 in z1)
    Modified("primaries/stay/I not empty", WITH_FAILOVER, 0.0, {"p2"}, STAY, 0.0, "all healthy primaries", ["p1"]),
    Modified("primaries/stay/I empty -> M", WITH_FAILOVER, 0.0, {"p1", "p2"}, STAY, 0.0, "all healthy primaries", ["p1", "p2"]),
    Modified("primaries/spill0/I not empty", WITH_FAILOVER, 0.0, {"p2"}, SPILL, 0.0, "all healthy primaries", ["p1"]),
    Modified("primaries/spill0/I empty -> E", WITH_FAILOVER, 0.0, {"p1", "p2"}, SPILL, 0.0, "all healthy primaries", ["p3", "p4"]),
    Modified("primaries/spill1.0/ratio 1 above", WITH_FAILOVER, 0.0, {"p3"}, SPILL, 1.0, "all healthy primaries", ["p1", "p2"]),
    Modified("primaries/spill0.8/ratio 0.5 below", WITH_FAILOVER, 0.0, {"p2"}, SPILL, 0.8, "all healthy primaries", ["p1", "p3", "p4"]),
    Modified("primaries/spill0.8/I empty -> E", WITH_FAILOVER, 0.0, {"p1", "p2"}, SPILL, 0.8, "all healthy primaries", ["p3", "p4"]),
    # original = all healthy failover backends; test set = failover backends (f1 in z1)
    Modified("failover/stay/I not empty", WITH_FAILOVER, 0.0, {"p1", "p2", "p3", "p4"}, STAY, 0.0, "all healthy failover backends", ["f1"]),
    Modified("failover/stay/I empty -> M", WITH_FAILOVER, 0.0, {"p1", "p2", "p3", "p4", "f1"}, STAY, 0.0, "all healthy failover backends", ["f1"]),
    Modified("failover/spill0/I not empty", WITH_FAILOVER, 0.0, {"p1", "p2", "p3", "p4"}, SPILL, 0.0, "all healthy failover backends", ["f1"]),
    Modified("failover/spill0/I empty -> E", WITH_FAILOVER, 0.0, {"p1", "p2", "p3", "p4", "f1"}, SPILL, 0.0, "all healthy failover backends", ["f2"]),
    Modified("failover/spill0.5/ratio 1 above", WITH_FAILOVER, 0.0, {"p1", "p2", "p3", "p4"}, SPILL, 0.5, "all healthy failover backends", ["f1"]),
    Modified("failover/spill0.5/ratio 0 below -> E", WITH_FAILOVER, 0.0, {"p1", "p2", "p3", "p4", "f1"}, SPILL, 0.5, "all healthy failover backends", ["f2"]),
    # original = all primaries (last resort): every mode gives the client's-zone primaries (newer texts)
    Modified("last resort/stay", WITH_FAILOVER, 0.0, {"p1", "p2", "p3", "p4", "f1", "f2"}, STAY, 0.0, "all primaries", ["p1", "p2"]),
    Modified("last resort/spill0", WITH_FAILOVER, 0.0, {"p1", "p2", "p3", "p4", "f1", "f2"}, SPILL, 0.0, "all primaries", ["p1", "p2"]),
    Modified("last resort/spill0.8", WITH_FAILOVER, 0.0, {"p1", "p2", "p3", "p4", "f1", "f2"}, SPILL, 0.8, "all primaries", ["p1", "p2"]),
    # disabled: the original set, whatever the client
    Modified("disabled", NO_POLICY, None, set(), "DISABLED", 0.0, "all healthy backends", ["a1", "a2", "b1", "b2"]),
]  # fmt: skip


@pytest.mark.parametrize("case", MODIFIED_CASES, ids=lambda c: c.why)
def test_modified_eligible_set(case: Modified) -> None:
    p = pool("p", case.backends, mode=case.mode, spill=case.spill, failover_ratio=case.policy)
    d = decide(p, case.down, client_zone="z1")
    assert d.original_kind == case.kind
    assert names(d.modified) == case.expected
    assert d.reasons  # every decision explains itself


@pytest.mark.parametrize(
    ("client_zone", "why"),
    [(None, "no zone"), ("w1", "zone in another region"), ("z9", "unknown zone")],
)
def test_incompatible_clients_get_the_original_set(client_zone, why) -> None:
    p = pool("p", NO_POLICY, mode=STAY)
    d = decide(p, set(), client_zone=client_zone)
    assert not d.compatible and names(d.modified) == ["a1", "a2", "b1", "b2"]


def test_empty_original_set_means_the_pool_cannot_answer() -> None:
    p = pool("p", WITH_FAILOVER, mode=STAY, failover_ratio=0.0, drop=True)
    d = decide(p, {"p1", "p2", "p3", "p4", "f1", "f2"})
    assert d.original_kind == "none" and d.modified == ()


# -- worked examples ------------------------------------------------------------------------
TEN = [backend(f"z1-{i}", "z1") for i in range(5)] + [backend(f"z2-{i}", "z2") for i in range(5)]
TEN_DOWN = {"z2-3", "z2-4"}  # all five in zone 1 healthy, three in zone 2


def test_ten_backend_example_zone_1_stays() -> None:
    d = decide(pool("p", TEN, mode=SPILL, spill=0.8), TEN_DOWN, client_zone="z1")
    assert d.ratio == 1.0
    assert names(d.modified) == [f"z1-{i}" for i in range(5)]


def test_ten_backend_example_zone_2_spills_to_all_eight_healthy() -> None:
    d = decide(pool("p", TEN, mode=SPILL, spill=0.8), TEN_DOWN, client_zone="z2")
    assert d.ratio == pytest.approx(0.6)
    assert names(d.modified) == sorted([f"z1-{i}" for i in range(5)] + ["z2-0", "z2-1", "z2-2"])


def test_spillover_one_stays_only_while_the_whole_zone_is_healthy() -> None:
    p = pool("p", TEN, mode=SPILL, spill=1.0)
    assert names(decide(p, set(), "z2").modified) == [f"z2-{i}" for i in range(5)]
    assert len(decide(p, {"z2-0"}, "z2").modified) == 9


def test_stay_within_zone_with_the_zone_down_answers_its_unhealthy_backends() -> None:
    p = pool("p", TEN, mode=STAY)
    d = decide(p, {f"z2-{i}" for i in range(5)}, client_zone="z2")
    assert names(d.modified) == [f"z2-{i}" for i in range(5)]


def test_drained_and_disabled_backends_are_left_out() -> None:
    from dnsd.health.view import BackendHealth

    p = pool("p", [*NO_POLICY, backend("off", "z1", enabled=False)], mode=STAY)
    health = view_of({("p", "a1"): BackendHealth(healthy=True, override="drain")})
    d = select_backends(p, health, "z1", ZONES)
    assert names(d.modified) == ["a2"]
