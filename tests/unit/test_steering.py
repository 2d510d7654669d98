"""Steering policies and the fallback-pool table (docs/steering.md, policies), table-driven."""

from __future__ import annotations

import ipaddress
import math
import random
from collections import Counter
from types import MappingProxyType

import pytest
from dnslib import QTYPE

from dnsd.config.model import Config
from dnsd.geo.locate import Location
from dnsd.health.view import BackendHealth, RttSample, view_of
from dnsd.snapshot import compile_snapshot
from dnsd.steering import ClientInfo, SteeringInputs, steer
from tests.builders import backend, lb, pool

NOW = 1_000_000.0
A = QTYPE.A


def snapshot(pools, lbs, node=None):
    config = Config(
        zones=(),
        monitors=MappingProxyType({}),
        pools=MappingProxyType({p.name: p for p in pools}),
        load_balancers=MappingProxyType({b.name: b for b in lbs}),
        client_zones=(),
    )
    return compile_snapshot(config, 1, node=node)


def simple_pool(name: str, address: str, **kw):
    return pool(name, [backend(f"{name}-1", address=address)], **kw)


POOLS = [
    simple_pool("p1", "192.0.2.1", lat=40.7, lon=-74.0),  # New York
    simple_pool("p2", "192.0.2.2", lat=50.1, lon=8.7),  # Frankfurt
    simple_pool("p3", "192.0.2.3", lat=35.7, lon=139.7),  # Tokyo
    simple_pool("fb", "192.0.2.99", lat=0.0, lon=0.0),
]
ADDRESS = {"p1": "192.0.2.1", "p2": "192.0.2.2", "p3": "192.0.2.3", "fb": "192.0.2.99"}
CLIENT = ClientInfo(ipaddress.ip_address("81.2.69.142"))


def run(lbs, down=(), client=CLIENT, seed=1, health=None, name=None, pools=POOLS):
    snap = snapshot(pools, lbs)
    health = health or view_of({(p, f"{p}-1"): p not in down for p in ADDRESS})
    target = snap.config.load_balancers[name or lbs[0].name]
    inputs = SteeringInputs(snap, health, client, random.Random(seed), NOW)
    return steer(inputs, target, A)


def pool_of(decision) -> str:
    inner = decision.innermost()
    return inner.pool


def located(
    country=None, region=None, lat=None, lon=None, prefix=24, subdivision=None
) -> ClientInfo:
    loc = Location(
        country=country,
        subdivision=subdivision,
        region=region,
        latitude=lat,
        longitude=lon,
        source="geoip",
        prefix_len=prefix,
    )
    return ClientInfo(ipaddress.ip_address("81.2.69.142"), location=loc)


# -- the fallback pool table, one row per case ------------------------------------------
FALLBACK_TABLE = [
    # (why, policy, down, expected pool, fail_open)
    ("off: defaults healthy, fallback idle", "off", set(), "p1", False),
    ("off: first default down, second answers", "off", {"p1"}, "p2", False),
    ("off: every default down, fallback answers", "off", {"p1", "p2"}, "fb", False),
    ("off: everything down, fallback regardless", "off", {"p1", "p2", "fb"}, "fb", True),
    ("random: everything down, fallback regardless", "random", {"p1", "p2", "fb"}, "fb", True),
    ("dynamic: no data, failover order", "dynamic", set(), "p1", False),
    ("dynamic: defaults down, healthy fallback ranked in", "dynamic", {"p1", "p2"}, "fb", False),
    ("dynamic: everything down, fallback regardless", "dynamic", {"p1", "p2", "fb"}, "fb", True),
    ("geo: unmapped client, defaults", "geo", set(), "p1", False),
    ("geo: defaults down, fallback after them", "geo", {"p1", "p2"}, "fb", False),
    ("geo: everything down, fallback regardless", "geo", {"p1", "p2", "fb"}, "fb", True),
    (
        "proximity: everything down, fallback regardless",
        "proximity",
        {"p1", "p2", "fb"},
        "fb",
        True,
    ),
]


@pytest.mark.parametrize(
    ("why", "policy", "down", "expected", "fail_open"),
    FALLBACK_TABLE,
    ids=[r[0] for r in FALLBACK_TABLE],
)
def test_fallback_table(why, policy, down, expected, fail_open) -> None:
    decision = run([lb("w", ["p1", "p2"], steering=policy, fallback="fb")], down=down)
    assert decision.pool == expected
    assert decision.fail_open is fail_open
    assert decision.addresses == (ADDRESS[expected],)


def test_off_never_offers_the_fallback_while_a_default_is_healthy() -> None:
    decision = run([lb("w", ["p1", "p2"], fallback="fb")], down={"p2"})
    assert decision.ordered == ["p1"]


def test_random_fallback_takes_part_while_healthy() -> None:
    seen = Counter(
        run([lb("w", ["p1", "p2"], steering="random", fallback="fb")], seed=s).pool
        for s in range(300)
    )
    assert set(seen) == {"p1", "p2", "fb"}


def test_geo_fallback_comes_after_mapped_and_default_pools() -> None:
    decision = run(
        [lb("w", ["p2"], steering="geo", fallback="fb", region_pools={"WEU": ["p1"]})],
        client=located("GB", "WEU"),
    )
    assert decision.ordered == ["p1", "p2", "fb"]


def test_dynamic_fallback_ranked_by_rtt_when_healthy() -> None:
    health = rtt_view({"p1": 80.0, "p2": 60.0, "fb": 10.0}, region="WEU")
    decision = run(
        [lb("w", ["p1", "p2"], steering="dynamic", fallback="fb")],
        client=located("GB", "WEU"),
        health=health,
    )
    assert decision.ordered == ["fb", "p2", "p1"]


def test_pool_both_default_and_fallback_takes_part_once() -> None:
    decision = run([lb("w", ["p1", "p2"], steering="random", fallback="p1")])
    assert sorted(decision.ordered) == ["p1", "p2"]


def test_no_fallback_configured_first_default_answers_when_all_down() -> None:
    decision = run([lb("w", ["p2", "p1"])], down={"p1", "p2", "fb"})
    assert decision.pool == "p2" and decision.fail_open


# -- geo --------------------------------------------------------------------------------
GEO = lb(
    "w",
    ["p1"],
    steering="geo",
    fallback="fb",
    region_pools={"WEU": ["p2", "p1"], "NEAS": ["p3"]},
    country_pools={"DE": ["p2"], "JP": ["p3", "p2"], "US": ["p1"]},
    subdivision_pools={"US-CA": ["p3"]},
    pop_pools={"fra": ["p2"]},
)
GEO_CASES = [
    ("region mapping", located("GB", "WEU"), set(), "p2"),
    ("country beats region", located("JP", "NEAS"), set(), "p3"),
    ("mapped pools in failover order", located("JP", "NEAS"), {"p3"}, "p2"),
    ("mapped all down: default pools", located("DE", "WEU"), {"p2"}, "p1"),
    ("unmapped region: default pools", located("BR", "SSAM"), set(), "p1"),
    ("no location: default pools", CLIENT, set(), "p1"),
    ("mapped and defaults down: fallback", located("DE", "WEU"), {"p1", "p2"}, "fb"),
    ("subdivision beats country", located("US", "WNAM", subdivision="CA"), set(), "p3"),
    ("unmapped subdivision: its country", located("US", "WNAM", subdivision="OR"), set(), "p1"),
]


@pytest.mark.parametrize(
    ("why", "client", "down", "expected"), GEO_CASES, ids=[c[0] for c in GEO_CASES]
)
def test_geo(why, client, down, expected) -> None:
    assert run([GEO], client=client, down=down).pool == expected


def test_geo_pop_mapping_beats_country() -> None:
    client = ClientInfo(
        ipaddress.ip_address("81.2.69.142"),
        location=Location(country="JP", region="NEAS"),
        pop="fra",
    )
    assert run([GEO], client=client).pool == "p2"


# -- proximity --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("lat", "lon", "expected"),
    [(48.9, 2.4, "p2"), (37.8, -122.4, "p1"), (-33.9, 151.2, "p3")],  # Paris, San Francisco, Sydney
)
def test_proximity_picks_the_nearest_healthy_pool(lat, lon, expected) -> None:
    decision = run(
        [lb("w", ["p1", "p2", "p3"], steering="proximity")], client=located(lat=lat, lon=lon)
    )
    assert decision.pool == expected


def test_proximity_skips_unhealthy_and_without_coordinates_uses_failover_order() -> None:
    assert (
        run(
            [lb("w", ["p1", "p2", "p3"], steering="proximity")],
            client=located(lat=48.9, lon=2.4),
            down={"p2"},
        ).pool
        == "p1"
    )
    assert run([lb("w", ["p3", "p1"], steering="proximity")]).pool == "p3"


# -- dynamic ----------------------------------------------------------------------------
def rtt_view(rtts: dict[str, float], region: str, samples: int = 5, age: float = 10.0, down=()):
    states = {}
    for p in ADDRESS:
        rtt = {region: RttSample(rtts[p], samples, NOW - age)} if p in rtts else {}
        states[(p, f"{p}-1")] = BackendHealth(
            healthy=p not in down, probed="healthy", rtt=MappingProxyType(rtt)
        )
    return view_of(states)


DYN = lb("w", ["p1", "p2", "p3"], steering="dynamic", min_samples=3, rtt_max_age_s=600)


def test_dynamic_lowest_rtt_from_the_client_region_wins() -> None:
    health = rtt_view({"p1": 90.0, "p2": 20.0, "p3": 150.0}, region="WEU")
    decision = run([DYN], client=located("GB", "WEU"), health=health)
    assert decision.pool == "p2" and decision.ordered == ["p2", "p1", "p3"]
    assert [c.rtt_ms for c in decision.candidates] == [90.0, 20.0, 150.0]


def test_dynamic_uses_the_profile_of_the_client_region_only() -> None:
    health = rtt_view({"p1": 90.0, "p2": 20.0, "p3": 150.0}, region="NEAS")
    assert (
        run([DYN], client=located("GB", "WEU"), health=health).pool == "p1"
    )  # no WEU data: failover


def test_dynamic_pools_with_data_come_before_pools_without() -> None:
    health = rtt_view({"p3": 150.0}, region="WEU")
    assert run([DYN], client=located("GB", "WEU"), health=health).ordered == ["p3", "p1", "p2"]


@pytest.mark.parametrize(
    ("samples", "age"), [(2, 10.0), (5, 601.0)], ids=["too-few-samples", "stale"]
)
def test_dynamic_too_few_or_stale_samples_count_as_no_data(samples, age) -> None:
    health = rtt_view({"p1": 90.0, "p2": 20.0, "p3": 150.0}, region="WEU", samples=samples, age=age)
    decision = run([DYN], client=located("GB", "WEU"), health=health)
    assert decision.pool == "p1" and "failover order" in decision.reasons[0]


def test_dynamic_skips_an_unhealthy_fast_pool() -> None:
    health = rtt_view({"p1": 90.0, "p2": 20.0, "p3": 150.0}, region="WEU", down={"p2"})
    assert run([DYN], client=located("GB", "WEU"), health=health).pool == "p1"


# -- statistics: weights and trickle ------------------------------------------------------------
def binomial_ok(hits: int, n: int, p: float) -> bool:
    """Within the two-sided 99.9% interval (normal approximation, z = 3.2905)."""
    half = 3.2905 * math.sqrt(n * p * (1 - p))
    return n * p - half <= hits <= n * p + half


def draws(lb_, n=10_000, **kw) -> Counter:
    snap = snapshot(kw.pop("pools", POOLS), [lb_])
    health = kw.pop("health", None) or view_of(
        {(p, f"{p}-1"): p not in kw.get("down", ()) for p in ADDRESS}
    )
    rng = random.Random(20261130)
    inputs = SteeringInputs(snap, health, CLIENT, rng, NOW)
    return Counter(steer(inputs, lb_, A).innermost().pool for _ in range(n))


def test_random_pool_weights_match_within_the_binomial_interval() -> None:
    pools = [
        simple_pool("p1", "192.0.2.1", weight=1),
        simple_pool("p2", "192.0.2.2", weight=3),
        *POOLS[2:],
    ]
    counts = draws(lb("w", ["p1", "p2"], steering="random"), pools=pools)
    assert binomial_ok(counts["p1"], 10_000, 0.25) and binomial_ok(counts["p2"], 10_000, 0.75)


def test_trickle_ratio_share_matches_within_the_binomial_interval() -> None:
    counts = draws(lb("w", ["p1", "p2"], trickle=0.1))
    assert binomial_ok(counts["p2"], 10_000, 0.1), counts


def test_trickle_one_sends_every_answer_to_the_backup() -> None:
    assert draws(lb("w", ["p1", "p2"], trickle=1.0), n=2000) == Counter({"p2": 2000})


def test_trickle_with_a_single_healthy_candidate_never_uses_an_unhealthy_pool() -> None:
    assert draws(lb("w", ["p1", "p2"], trickle=1.0), n=2000, down={"p2"}) == Counter({"p1": 2000})


def test_trickle_override_from_the_health_view_wins() -> None:
    health = view_of({}, trickle={"w": 1.0})
    assert draws(lb("w", ["p1", "p2"], trickle=0.0), n=500, health=health) == Counter({"p2": 500})


# -- nesting: the active-passive pattern ----------------------------------------------
def active_passive():
    return [
        lb("api", ["p1", "lb:api-regional"], trickle=0.1, fallback="fb"),
        lb("api-regional", ["p2"], steering="geo", region_pools={"WEU": ["p2"], "NEAS": ["p3"]}),
    ]


def test_active_passive_trickles_to_the_client_region_backup() -> None:
    lbs = active_passive()
    snap = snapshot(POOLS, lbs)
    health = view_of({})
    rng = random.Random(7)
    paths = Counter()
    for _ in range(10_000):
        d = steer(SteeringInputs(snap, health, located("JP", "NEAS"), rng, NOW), lbs[0], A)
        paths[tuple(d.path())] += 1
    assert set(paths) == {("p1",), ("lb:api-regional", "p3")}
    assert binomial_ok(paths[("lb:api-regional", "p3")], 10_000, 0.1)


def test_active_passive_global_down_every_client_gets_its_region_backup() -> None:
    lbs = active_passive()
    assert run(lbs, down={"p1"}, client=located("JP", "NEAS")).path() == ["lb:api-regional", "p3"]
    assert run(lbs, down={"p1"}, client=located("GB", "WEU")).path() == ["lb:api-regional", "p2"]


def test_nested_entry_is_unhealthy_when_the_inner_lb_has_no_healthy_pool() -> None:
    lbs = active_passive()
    decision = run(lbs, down={"p2", "p3"}, client=located("GB", "WEU"))
    assert decision.path() == ["p1"] and decision.ordered == ["p1"]


def test_answer_respects_family_and_max_answers() -> None:
    p = pool(
        "multi",
        [backend(f"m{i}", address=f"192.0.2.{10 + i}") for i in range(5)]
        + [backend("v6", address="2001:db8::1")],
    )
    snap = snapshot([p], [lb("w", ["multi"], max_answers=3)])
    inputs = SteeringInputs(snap, view_of({}), CLIENT, random.Random(1), NOW)
    d4 = steer(inputs, snap.config.load_balancers["w"], QTYPE.A)
    d6 = steer(inputs, snap.config.load_balancers["w"], QTYPE.AAAA)
    assert len(d4.addresses) == 3 and len(set(d4.addresses)) == 3
    assert d6.addresses == ("2001:db8::1",)


def test_hash_selection_is_sticky_per_client_subnet() -> None:
    p = pool("multi", [backend(f"m{i}", address=f"192.0.2.{10 + i}") for i in range(8)])
    snap = snapshot([p], [lb("w", ["multi"], selection="hash")])
    target = snap.config.load_balancers["w"]

    def answer(addr: str, seed: int) -> tuple[str, ...]:
        client = ClientInfo(ipaddress.ip_address(addr))
        return steer(
            SteeringInputs(snap, view_of({}), client, random.Random(seed), NOW), target, A
        ).addresses

    assert len({answer("198.51.100.7", s) for s in range(20)}) == 1
    assert answer("198.51.100.7", 1) == answer("198.51.100.200", 2)  # same /24
    assert len({answer(f"203.0.{i}.1", 0) for i in range(40)}) > 1  # different subnets spread


def test_dynamic_trickle_after_the_fastest_pool_fails_is_an_ordinary_failover() -> None:
    """docs/steering.md, trickle: the fastest pool stays the primary by its last RTT, so when it fails
    every answer goes to the next pool: no share of 10,000 seeded draws to a third pool."""
    dyn = lb(
        "w", ["p1", "p2", "p3"], steering="dynamic", min_samples=3, rtt_max_age_s=600, trickle=0.1
    )
    rtts = {"p1": 20.0, "p2": 60.0, "p3": 90.0}
    healthy = draws(dyn, health=rtt_view(rtts, region="local"))
    assert binomial_ok(healthy["p2"], 10_000, 0.1) and healthy["p3"] == 0, healthy  # trickle
    failed = draws(dyn, health=rtt_view(rtts, region="local", down={"p1"}))
    assert failed == Counter({"p2": 10_000}), failed
    decision = run([dyn], health=rtt_view(rtts, region="local", down={"p1"}))
    assert decision.primary == "p1" and "primary p1, 20.0 ms, is down" in decision.reasons[0]


def multi_rtt_view(rtts: dict[tuple[str, str], float], down=()):
    """(pool, probe source) → EWMA ms, 5 fresh samples each; pools absent are unmonitored."""
    states = {}
    for p in ADDRESS:
        rtt = {src: RttSample(ms, 5, NOW - 10.0) for (q, src), ms in rtts.items() if q == p}
        states[(p, f"{p}-1")] = BackendHealth(
            healthy=p not in down, probed="healthy", rtt=MappingProxyType(rtt)
        )
    return view_of(states)


# (why, default pools, RTTs by (pool, source), client region, down, expected shares)
THIRD_POOL_TABLE = [
    (
        "fastest fails, the survivors are unmonitored",
        ["p2", "p3", "p1"],
        {("p1", "local"): 20.0},
        None,
        {"p1"},
        {"p2": 10_000},
    ),
    (
        "fastest fails, measured only from the client's region",
        ["p1", "p2", "p3"],
        {("p1", "WEU"): 20.0, ("p2", "local"): 60.0, ("p3", "local"): 90.0},
        "WEU",
        {"p1"},
        {"p2": 10_000},
    ),
    (
        "fastest fails, client region measured it, the survivors unmonitored",
        ["p3", "p2", "p1"],
        {("p1", "WEU"): 20.0},
        "WEU",
        {"p1"},
        {"p3": 10_000},
    ),
    (
        "a slower unmonitored survivor fails: trickle unchanged",
        ["p2", "p3", "p1"],
        {("p1", "local"): 20.0},
        None,
        {"p3"},
        {"p1": 9_000, "p2": 1_000},
    ),
    (
        "all healthy, unmonitored survivors: fastest primary, first other the backup",
        ["p2", "p3", "p1"],
        {("p1", "local"): 20.0},
        None,
        set(),
        {"p1": 9_000, "p2": 1_000},
    ),
]


@pytest.mark.parametrize(
    ("why", "defaults", "rtts", "region", "down", "shares"),
    THIRD_POOL_TABLE,
    ids=[r[0] for r in THIRD_POOL_TABLE],
)
def test_dynamic_trickle_never_shares_to_a_third_pool(why, defaults, rtts, region, down, shares):
    """docs/steering.md, trickle: the fastest pool stays the primary by its last RTT even when the
    survivors have no current data, so its failure is an ordinary failover."""
    dyn = lb("w", defaults, steering="dynamic", min_samples=3, rtt_max_age_s=600, trickle=0.1)
    snap = snapshot(POOLS, [dyn])
    client = located("GB", region) if region else CLIENT
    inputs = SteeringInputs(snap, multi_rtt_view(rtts, down), client, random.Random(7), NOW)
    got = Counter(steer(inputs, dyn, A).innermost().pool for _ in range(10_000))
    assert set(got) == set(shares), got
    for ref, expected in shares.items():
        assert binomial_ok(got[ref], 10_000, expected / 10_000), got
