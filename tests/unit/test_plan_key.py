"""A plan's key is the client fields it read, and its validity its own (dnsd/steering/plan_key.py)."""

from __future__ import annotations

import ipaddress
import random
from types import MappingProxyType

import pytest
from dnslib import QTYPE

from dnsd.geo.locate import Location
from dnsd.health.view import BackendHealth, RttSample, view_of
from dnsd.steering import ClientInfo, SteeringInputs
from dnsd.steering.plan import lasting
from dnsd.steering.plan_key import FIELDS, key_for
from dnsd.steering.select import build_plan
from tests.builders import lb
from tests.unit.test_steering import ADDRESS, NOW, POOLS, snapshot

A = QTYPE.A
HEALTHY = view_of({(p, f"{p}-1"): True for p in ADDRESS})


def client(region: str, country: str, prefix: int = 20, lat: float = 51.5, lon: float = 0.0):
    where = Location(country, None, region, lat, lon, "geoip", prefix)
    return ClientInfo(ipaddress.ip_address("81.2.69.142"), location=where)


LONDON = client("WEU", "GB", prefix=20)
NEW_YORK = client("ENAM", "US", prefix=16, lat=40.7, lon=-74.0)


def plan_for(balancer, who: ClientInfo, health=HEALTHY, now: float = NOW):
    snap = snapshot(POOLS, [balancer])
    inputs = SteeringInputs(snap, health, who, random.Random(0), now)
    return build_plan(inputs, snap.config.load_balancers[balancer.name], A)


def test_a_plan_that_reads_no_region_keys_two_regions_alike() -> None:
    failover = lb("w", ["p1", "p2"], fallback="fb")
    london, new_york = plan_for(failover, LONDON), plan_for(failover, NEW_YORK)
    assert london.key is not None and london.key == new_york.key
    assert not {"region", "country", "prefix_len"} & set(london.key[2])
    assert london.scope_max == 0  # nothing about the client was read: no ECS scope either


def test_a_plan_that_reads_the_region_keys_two_regions_apart() -> None:
    by_region = lb("w", ["p1"], steering="geo", region_pools={"WEU": ["p2"], "ENAM": ["p3"]})
    london, new_york = plan_for(by_region, LONDON), plan_for(by_region, NEW_YORK)
    assert london.key != new_york.key
    assert "region" in london.key[2]  # type: ignore[index]
    assert london.ordering.refs[0] == "p2" and new_york.ordering.refs[0] == "p3"


def test_the_key_is_what_a_new_client_would_look_up() -> None:
    by_region = lb("w", ["p1"], steering="geo", region_pools={"WEU": ["p2"]})
    plan = plan_for(by_region, LONDON)
    assert plan.key is not None
    fields = plan.key[2]
    assert key_for("w", A, fields, LONDON) == plan.key
    assert key_for("w", A, fields, NEW_YORK) != plan.key
    assert set(fields) <= set(FIELDS)


@pytest.mark.parametrize("who", [LONDON, NEW_YORK])
def test_the_ecs_scope_is_the_prefix_that_was_read(who: ClientInfo) -> None:
    by_region = lb("w", ["p1"], steering="geo", region_pools={"WEU": ["p2"]})
    plan = plan_for(by_region, who)
    assert plan.key is not None
    read = dict(zip(plan.key[2], plan.key[3], strict=True))
    assert read["prefix_len"] == who.location.prefix_len == plan.scope_max


def test_coordinates_are_read_only_by_proximity() -> None:
    near = plan_for(lb("w", ["p1", "p2"], steering="proximity"), LONDON)
    ordered = plan_for(lb("w", ["p1", "p2"]), LONDON)
    assert {"latitude", "longitude"} <= set(near.key[2])  # type: ignore[index]
    assert not {"latitude", "longitude"} & set(ordered.key[2])  # type: ignore[index]


def test_a_plan_by_pop_region_reads_none_of_the_clients_location() -> None:
    pop = lb("w", ["p1"], steering="geo", region_pools={"WEU": ["p2"]}, client_region="pop")
    london, new_york = plan_for(pop, LONDON), plan_for(pop, NEW_YORK)
    assert london.key == new_york.key
    assert "region" not in london.key[2]  # type: ignore[index]


def rtt_health(age_s: float) -> object:
    sample = RttSample(20.0, 5, NOW - age_s)
    states = {
        (p, f"{p}-1"): BackendHealth(True, probed="healthy", rtt=MappingProxyType({"WEU": sample}))
        for p in ADDRESS
    }
    return view_of(states)


def test_a_plan_ranked_by_rtt_holds_for_its_view_until_the_first_sample_ages_out() -> None:
    dynamic = lb("w", ["p1", "p2"], steering="dynamic", min_samples=3, rtt_max_age_s=600)
    plan = plan_for(dynamic, LONDON, health=rtt_health(age_s=100.0))
    assert plan.per_view and plan.until == NOW - 100.0 + 600
    assert not lasting(plan)
    assert lasting(plan_for(lb("w", ["p1", "p2"]), LONDON, health=rtt_health(age_s=100.0)))
