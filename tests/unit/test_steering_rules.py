"""Steering rules that follow the source systems exactly: the trickle's primary and
backup (docs/steering.md, trickle), the dynamic vantage point, `client_region: pop` and the
proximity fallback pool. Table-driven; statistics over 10,000 seeded draws checked
against binomial 99.9% intervals."""

from __future__ import annotations

import ipaddress
import random
from collections import Counter
from types import MappingProxyType

import pytest
from dnslib import QTYPE

from dnsd.geo.locate import Location
from dnsd.health.view import BackendHealth, RttSample, view_of
from dnsd.snapshot import NodeSettings
from dnsd.steering import ClientInfo, SteeringInputs, steer
from tests.builders import lb
from tests.unit.test_steering import ADDRESS, NOW, POOLS, binomial_ok, located
from tests.unit.test_steering import snapshot as steering_snapshot

N = 10_000
CLIENT = ClientInfo(ipaddress.ip_address("81.2.69.142"))


def snapshot(lbs, node=None, pools=POOLS):
    return steering_snapshot(pools, lbs, node)


def health_view(down=(), rtts=None, source="local"):
    """Every backend healthy unless its pool is in `down`; `rtts` {pool: ms} from `source`."""
    states = {}
    for p in ADDRESS:
        rtt = {}
        if rtts and p in rtts:
            rtt = {source: RttSample(rtts[p], 5, NOW - 5.0)}
        states[(p, f"{p}-1")] = BackendHealth(
            healthy=p not in down, probed="healthy", rtt=MappingProxyType(rtt)
        )
    return view_of(states)


def shares(target, lbs=None, down=(), client=CLIENT, node=None, health=None, n=N) -> Counter:
    snap = snapshot(lbs or [target], node)
    inputs = SteeringInputs(snap, health or health_view(down), client, random.Random(1411), NOW)
    return Counter(steer(inputs, target, QTYPE.A).innermost().pool for _ in range(n))


def one(target, **kw):
    snap = snapshot(kw.pop("lbs", None) or [target], kw.pop("node", None))
    health = kw.pop("health", None) or health_view(kw.pop("down", ()))
    inputs = SteeringInputs(snap, health, kw.pop("client", CLIENT), random.Random(3), NOW)
    return steer(inputs, target, QTYPE.A)


# -- trickle: primary healthy → backup gets r; primary down → plain failover ----------------
GEO_FB = lb("g", ["p1"], steering="geo", fallback="fb", region_pools={"WEU": ["p2"]}, trickle=0.1)
TRICKLE_TABLE = [
    # (why, lb, down, client, expected shares {pool: p})
    ("off: primary healthy, r=0.1 to the first backup only",
     lb("w", ["p1", "p2", "p3"], trickle=0.1), (), CLIENT, {"p1": 0.9, "p2": 0.1}),
    ("off: primary down, 3 pools: every answer from the first healthy backup",
     lb("w", ["p1", "p2", "p3"], trickle=0.1), ("p1",), CLIENT, {"p2": 1.0}),
    ("off: r=1.0 with the primary down: the healthy first backup gets everything",
     lb("w", ["p1", "p2", "p3"], trickle=1.0), ("p1",), CLIENT, {"p2": 1.0}),
    ("off: r=1.0 with the primary healthy: a manual failover to the backup",
     lb("w", ["p1", "p2", "p3"], trickle=1.0), (), CLIENT, {"p2": 1.0}),
    ("off: backup down: the next healthy pool is the backup",
     lb("w", ["p1", "p2", "p3"], trickle=0.1), ("p2",), CLIENT, {"p1": 0.9, "p3": 0.1}),
    ("off: one default and a fallback: no backup, the fallback gets nothing",
     lb("w", ["p1"], fallback="fb", trickle=0.1), (), CLIENT, {"p1": 1.0}),
    ("off: the fallback listed as a default pool too is a backup",
     lb("w", ["p1", "fb"], fallback="fb", trickle=0.1), (), CLIENT, {"p1": 0.9, "fb": 0.1}),
    ("geo: mapped primary, the default pool is the backup, never the fallback",
     GEO_FB, (), located("GB", "WEU"), {"p2": 0.9, "p1": 0.1}),
    ("geo: unmapped client, one default and a fallback: no trickle to maintenance",
     GEO_FB, (), located("JP", "NEAS"), {"p1": 1.0}),
    ("geo: mapped primary down: failover to the default pool, no trickle",
     GEO_FB, ("p2",), located("GB", "WEU"), {"p1": 1.0}),
    ("dynamic with a fallback pool: the fallback is not a backup",
     lb("d", ["p1"], steering="dynamic", fallback="fb", trickle=0.1), (), CLIENT, {"p1": 1.0}),
    ("random: no primary, the trickle is ignored (pool weights only)",
     lb("r", ["p1", "p2"], steering="random", trickle=1.0), (), CLIENT, {"p1": 0.5, "p2": 0.5}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("why", "target", "down", "client", "expected"),
    TRICKLE_TABLE,
    ids=[row[0] for row in TRICKLE_TABLE],
)
def test_trickle_table(why, target, down, client, expected) -> None:
    counts = shares(target, down=down, client=client)
    assert set(counts) == {p for p, share in expected.items() if share > 0}, counts
    for pool, share in expected.items():
        if 0 < share < 1:
            assert binomial_ok(counts[pool], N, share), (pool, counts)
        else:
            assert counts[pool] == share * N, (pool, counts)


def test_trickle_explanation_names_primary_backup_and_why_not() -> None:
    healthy = one(lb("w", ["p1", "p2", "p3"], trickle=0.5))
    assert (healthy.primary, healthy.backup) == ("p1", "p2")
    assert "trickle 0.5 (primary p1, backup p2)" in healthy.reasons[-1]
    down = one(lb("w", ["p1", "p2", "p3"], trickle=0.5), down=("p1",))
    assert down.backup is None and down.trickle_draw is None
    assert "primary p1 unhealthy: failover, no trickle" in down.reasons[-1]
    alone = one(lb("w", ["p1"], fallback="fb", trickle=0.5))
    assert "no backup" in alone.reasons[-1]


# -- dynamic: which vantage point decides ---------------------------------------------------
DYN = lb("d", ["p1", "p2", "p3"], steering="dynamic")
THREE_REGIONS = [located("GB", "WEU"), located("JP", "NEAS"), located("BR", "SSAM")]


@pytest.mark.parametrize("client", THREE_REGIONS, ids=["WEU", "NEAS", "SSAM"])
def test_single_node_without_sources_steers_every_region_by_its_own_rtts(client) -> None:
    health = health_view(rtts={"p1": 40.0, "p2": 5.0}, source="local")
    decision = one(DYN, client=client, health=health)
    assert decision.pool == "p2" and decision.ordered == ["p2", "p1", "p3"]
    assert decision.rtt_source == "local"
    assert "RTT measured from this node (local)" in decision.reasons[0]
    assert [c.rtt_ms for c in decision.candidates] == [40.0, 5.0, None]


def test_a_node_with_a_pop_region_uses_its_region_profile_for_other_regions() -> None:
    health = health_view(rtts={"p1": 5.0, "p3": 50.0}, source="WEU")
    node = NodeSettings(name="fra", pop_region="WEU")
    decision = one(DYN, client=located("JP", "NEAS"), health=health, node=node)
    assert decision.pool == "p1" and decision.rtt_source == "WEU"
    assert "this node (WEU)" in decision.reasons[0]


def test_the_client_regions_profile_beats_the_nodes_own() -> None:
    states = {
        ("p1", "p1-1"): {"local": 5.0, "NEAS": 80.0},
        ("p2", "p2-1"): {"local": 50.0, "NEAS": 10.0},
    }
    health = view_of(
        {
            key: BackendHealth(
                healthy=True,
                probed="healthy",
                rtt=MappingProxyType({s: RttSample(ms, 5, NOW - 1) for s, ms in rtts.items()}),
            )
            for key, rtts in states.items()
        }
    )
    target = lb("d", ["p1", "p2"], steering="dynamic")
    assert one(target, client=located("JP", "NEAS"), health=health).pool == "p2"
    assert one(target, client=located("GB", "WEU"), health=health).pool == "p1"


def test_no_current_data_anywhere_is_failover_order() -> None:
    decision = one(DYN, client=located("JP", "NEAS"), health=health_view())
    assert decision.pool == "p1" and decision.rtt_source is None
    assert "no current RTT data from NEAS or this node: failover order" in decision.reasons[0]


# -- client_region: pop ------------------------------------------------------------------------
POP_GEO = dict(steering="geo", region_pools={"WEU": ["p2"], "NEAS": ["p3"]})


@pytest.mark.parametrize(
    ("client_region", "pop_region", "expected", "scope"),
    [
        ("client", "NEAS", "p2", [24]),  # the client's own region (GB → WEU), scope /24
        ("pop", "NEAS", "p3", []),  # every client of this node is in NEAS: scope 0
        ("pop", None, "p1", []),  # no pop_region: no region, default pools
    ],
)
def test_client_region_pop(client_region, pop_region, expected, scope) -> None:
    target = lb("g", ["p1"], client_region=client_region, **POP_GEO)
    node = NodeSettings(name="n1", pop_region=pop_region)
    decision = one(target, client=located("GB", "WEU"), node=node)
    assert decision.pool == expected
    assert decision.scope_prefixes == scope
    assert decision.client_region == client_region


def test_client_region_pop_in_a_nested_lb_applies_to_that_lb_only() -> None:
    inner = lb("inner", ["p1"], client_region="pop", **POP_GEO)
    outer = lb("outer", ["lb:inner"])
    node = NodeSettings(pop_region="NEAS")
    decision = one(outer, lbs=[outer, inner], client=located("GB", "WEU"), node=node)
    assert decision.path() == ["lb:inner", "p3"]


# -- proximity: the fallback pool is never ranked by distance --------------------------------
def test_proximity_ranks_the_fallback_last_and_it_needs_no_coordinates() -> None:
    from tests.builders import backend, pool

    pools = [*POOLS[:3], pool("fb", [backend("fb-1", address="192.0.2.99")])]  # no coordinates
    target = lb("p", ["p1", "p2"], steering="proximity", fallback="fb")
    snap = snapshot([target], pools=pools)
    client = located(lat=0.1, lon=0.1)  # nearer to nothing in particular
    inputs = SteeringInputs(snap, health_view(), client, random.Random(1), NOW)
    assert steer(inputs, target, QTYPE.A).ordered[-1] == "fb"
    inputs = SteeringInputs(snap, health_view(down=("p1", "p2")), client, random.Random(1), NOW)
    assert steer(inputs, target, QTYPE.A).pool == "fb"


def test_location_of_a_pop_lb_is_the_nodes_region() -> None:
    from dnsd.steering.select import pop_location

    snap = snapshot([], NodeSettings(pop_region="SAS"))
    inputs = SteeringInputs(snap, view_of({}), CLIENT, random.Random(), NOW)
    assert pop_location(inputs) == Location(region="SAS", source="pop")


# -- client_networks: longest prefix first, before the database ------------------------------
def test_client_networks_longest_prefix_wins_over_both_families() -> None:
    from dnsd.config.model import ClientNetwork
    from dnsd.geo.locate import locate
    from dnsd.geo.networks import NetworkTable
    from dnsd.geo.regions import region_table

    net = ipaddress.ip_network
    table = NetworkTable(
        (
            ClientNetwork(net("10.0.0.0/8"), "WEU", None),
            ClientNetwork(net("10.1.0.0/16"), "NEAS", "JP"),
            ClientNetwork(net("10.1.2.0/24"), "SAS", None),
            ClientNetwork(net("2001:db8::/32"), "OC", None),
        )
    )

    def where(address: str) -> tuple[str | None, int | None, str | None]:
        loc = locate(ipaddress.ip_address(address), None, region_table(), "ENAM", table)
        return loc.region, loc.prefix_len, loc.source

    assert where("10.1.2.3") == ("SAS", 24, "client_networks")
    assert where("10.1.3.3") == ("NEAS", 16, "client_networks")
    assert where("10.200.0.1") == ("WEU", 8, "client_networks")
    assert where("2001:db8:5::1") == ("OC", 32, "client_networks")
    assert where("::ffff:10.1.2.3") == ("SAS", 24, "client_networks")  # IPv4-mapped
    assert where("11.0.0.1") == ("ENAM", None, "pop_region")  # nothing matched, no database
