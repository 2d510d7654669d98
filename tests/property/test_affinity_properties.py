"""Hypothesis properties of zonal affinity."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dnsd.affinity import select_backends
from dnsd.health.view import view_of
from tests.builders import backend, pool
from tests.tiers import examples

ZONES = ["z1", "z2", "z3"]
ZONE_REGIONS = {"z1": "ENAM", "z2": "ENAM", "z3": "ENAM", "w1": "WEU"}
MODES = ["DISABLED", "STAY_WITHIN_ZONE", "SPILL_CROSS_ZONE"]


@st.composite
def scenarios(draw):
    count = draw(st.integers(1, 8))
    backends = [
        backend(
            f"b{i}",
            draw(st.sampled_from(ZONES)),
            draw(st.sampled_from(["primary", "primary", "failover"])),
        )
        for i in range(count)
    ]
    policy = draw(st.one_of(st.none(), st.floats(0.0, 1.0)))
    p = pool(
        "p",
        backends,
        mode=draw(st.sampled_from(MODES)),
        spill=draw(st.floats(0.0, 1.0)),
        failover_ratio=policy,
        drop=draw(st.booleans()),
    )
    healthy = {("p", b.name): draw(st.booleans()) for b in backends}
    client_zone = draw(st.sampled_from([None, "w1", *ZONES]))
    return p, view_of(healthy), client_zone


@settings(max_examples=examples(400), deadline=None)
@given(scenarios())
def test_modified_set_is_a_subset_of_the_configured_backends(s) -> None:
    p, health, zone = s
    d = select_backends(p, health, zone, ZONE_REGIONS)
    assert set(d.modified) <= set(p.backends)
    assert set(d.original) <= set(p.backends)


@settings(max_examples=examples(400), deadline=None)
@given(scenarios())
def test_disabled_or_incompatible_client_gets_the_original_set(s) -> None:
    p, health, zone = s
    d = select_backends(p, health, zone, ZONE_REGIONS)
    if p.zonal_affinity.mode == "DISABLED" or not d.compatible:
        assert d.modified == d.original


@settings(max_examples=examples(400), deadline=None)
@given(scenarios())
def test_spill_never_adds_an_unhealthy_backend_the_original_set_did_not_have(s) -> None:
    p, health, zone = s
    d = select_backends(p, health, zone, ZONE_REGIONS)
    if p.zonal_affinity.mode == "SPILL_CROSS_ZONE":
        unhealthy = {b for b in d.modified if not health.is_healthy(p, b)}
        assert unhealthy <= set(d.original)


@settings(max_examples=examples(400), deadline=None)
@given(scenarios())
def test_stay_within_zone_with_a_match_returns_only_the_client_zone(s) -> None:
    p, health, zone = s
    d = select_backends(p, health, zone, ZONE_REGIONS)
    if p.zonal_affinity.mode == "STAY_WITHIN_ZONE" and d.zonal_match:
        assert d.modified and all(b.zone == zone for b in d.modified)


@settings(max_examples=examples(300), deadline=None)
@given(scenarios(), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_raising_the_spillover_ratio_never_turns_a_spill_into_a_stay(s, r1, r2) -> None:
    p, health, zone = s
    low, high = sorted((r1, r2))

    def stays(ratio: float) -> bool:
        q = pool(
            "p",
            list(p.backends),
            mode="SPILL_CROSS_ZONE",
            spill=ratio,
            failover_ratio=p.failover_policy.failover_ratio
            if p.failover_policy.configured
            else None,
            drop=p.failover_policy.drop_traffic_if_unhealthy,
        )
        d = select_backends(q, health, zone, ZONE_REGIONS)
        return d.zonal_match and bool(d.intersection) and d.modified == d.intersection

    if stays(high):
        assert stays(low)
