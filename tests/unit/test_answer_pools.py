"""`answer_pools` and `distinct` (docs/steering.md, several pools per answer): seeded tables
for the exact rule — one address from each of the first N healthy pools in steering's order,
a pool skipped when its region, zone or domain is already in the answer — the explanation,
and the keys validated with clear errors."""

from __future__ import annotations

import ipaddress
import random
from collections import Counter
from dataclasses import replace
from types import MappingProxyType

import pytest
from dnslib import QTYPE

from dnsd.config.loader import check_directory
from dnsd.config.model import ClientZone
from dnsd.health.view import view_of
from dnsd.steering import ClientInfo, SteeringInputs, steer
from dnsd.steering.describe import describe
from dnsd.steering.draws import walk
from dnsd.steering.select import build_plan, compile_plan
from tests.builders import backend, lb, pool
from tests.unit.test_config_check import HEADER, write
from tests.unit.test_steering import CLIENT, NOW, snapshot

POOLS = [
    pool(
        "us1",
        [
            backend("us1-a", "use1-a", address="192.0.2.1"),
            backend("us1-b", "use1-b", address="192.0.2.2"),
        ],
        region="ENAM",
    ),
    pool("us2", [backend("us2-a", "use1-a", address="192.0.2.11")], region="ENAM"),
    pool(
        "eu",
        [
            backend("eu-a", "euw1-a", address="198.51.100.1"),
            backend("eu-6", "euw1-a", address="2001:db8::1"),
        ],
        region="WEU",
    ),
    pool("ap", [backend("ap-a", "apne1-a", address="203.0.113.1")], region="NEAS"),
    pool("fb", [backend("fb-a", "use1-b", address="192.0.2.99")], region="ENAM"),
]
DOMAINS = {"us1": "rack-1", "us2": "rack-2", "eu": "rack-1", "ap": "rack-3", "fb": "rack-9"}
ORDER = ["us1", "us2", "eu", "ap"]


def answer_lb(n=2, distinct=None, **kw):
    return replace(lb("w", ORDER, fallback="fb", **kw), answer_pools=n, distinct=distinct)


def decide(target, down=(), seed=1, qtype=QTYPE.A):
    pools = [replace(p, domain=DOMAINS[p.name]) for p in POOLS]
    snap = snapshot(pools, [target])
    health = view_of({(p.name, b.name): p.name not in down for p in pools for b in p.backends})
    inputs = SteeringInputs(snap, health, CLIENT, random.Random(seed), NOW)
    return steer(inputs, snap.config.load_balancers["w"], qtype)


def pools_of(decision) -> tuple[str, ...]:
    return decision.innermost().answer_pools


@pytest.mark.parametrize(
    ("n", "distinct", "down", "expected"),
    [
        # no label compared: the first N healthy pools in failover order
        (2, None, (), ("us1", "us2")),
        (3, None, (), ("us1", "us2", "eu")),
        (2, None, {"us1"}, ("us2", "eu")),
        # one address per region: us2 shares ENAM with us1
        (2, "region", (), ("us1", "eu")),
        (3, "region", (), ("us1", "eu", "ap")),
        (2, "region", {"us1"}, ("us2", "eu")),
        (2, "region", {"eu"}, ("us1", "ap")),
        # only ENAM left: one address (never two from one region)
        (2, "region", {"eu", "ap"}, ("us1",)),
        # domains: us1 and eu share rack-1
        (3, "domain", (), ("us1", "us2", "ap")),
        (2, "domain", {"us2"}, ("us1", "ap")),
        # more pools than healthy: what is healthy
        (4, None, {"us2", "ap"}, ("us1", "eu")),
    ],
)
def test_the_first_n_healthy_pools_with_distinct_labels(n, distinct, down, expected) -> None:
    for seed in range(20):
        decision = decide(answer_lb(n, distinct), down=down, seed=seed)
        assert pools_of(decision) == expected, seed
        assert len(decision.addresses) == len(expected)
        assert decision.pool == expected[0] and not decision.fail_open


def test_distinct_zone_picks_the_addresses_of_zones_not_yet_in_the_answer() -> None:
    # us1 draws use1-a or use1-b; us2 is only use1-a: it joins the answer only when us1 drew
    # use1-b; otherwise eu (euw1-a) is second
    seen = Counter()
    for seed in range(400):
        decision = decide(answer_lb(2, "zone"), seed=seed)
        seen[decision.addresses] += 1
        if decision.addresses[0] == "192.0.2.1":  # us1-a, zone use1-a
            assert pools_of(decision) == ("us1", "eu")
            assert "distinct zone: use1-a already in the answer" in decision.not_chosen["us2"]
        else:
            assert decision.addresses == ("192.0.2.2", "192.0.2.11")
    assert set(seen) == {("192.0.2.1", "198.51.100.1"), ("192.0.2.2", "192.0.2.11")}
    assert all(count > 150 for count in seen.values())  # each backend of us1 half the time


def test_each_pool_gives_one_address_drawn_by_backend_weight() -> None:
    firsts = Counter(decide(answer_lb(2, "region"), seed=s).addresses[0] for s in range(2000))
    assert set(firsts) == {"192.0.2.1", "192.0.2.2"}
    assert 900 < firsts["192.0.2.1"] < 1100  # 50% ± 4.6 sd


def test_a_pool_without_the_asked_family_is_skipped() -> None:
    decision = decide(answer_lb(2), qtype=QTYPE.AAAA)
    assert pools_of(decision) == ("eu",) and decision.addresses == ("2001:db8::1",)


def test_random_steering_puts_the_drawn_pool_first_then_policy_order() -> None:
    target = answer_lb(2, "region", steering="random")
    sets = Counter(frozenset(pools_of(decide(target, seed=s))) for s in range(600))
    # drawn us1, us2 or the healthy fallback (it takes part in random draws) → that ENAM
    # pool with eu; drawn eu or ap → it with us1 (the first ENAM pool in configured order)
    assert set(sets) == {
        frozenset({"us1", "eu"}),
        frozenset({"us2", "eu"}),
        frozenset({"fb", "eu"}),
        frozenset({"ap", "us1"}),
    }
    for pools in sets:
        regions = {"us1": "ENAM", "us2": "ENAM", "eu": "WEU", "ap": "NEAS", "fb": "ENAM"}
        assert len({regions[p] for p in pools}) == 2


def test_trickle_puts_the_backup_first() -> None:
    # without distinct the answer is the same set either way (it is a set)
    plain = {frozenset(pools_of(decide(answer_lb(2, trickle=0.5), seed=s))) for s in range(50)}
    assert plain == {frozenset({"us1", "us2"})}
    # with distinct region the trickled answers hold the backup (us2) instead of us1
    target = answer_lb(2, "region", trickle=0.25)
    seen = Counter(pools_of(decide(target, seed=s)) for s in range(2000))
    assert set(seen) == {("us1", "eu"), ("us2", "eu")}
    assert 420 < seen[("us2", "eu")] < 580  # 25% ± 4 sd


def test_nothing_healthy_the_fallback_alone_answers() -> None:
    decision = decide(answer_lb(2, "region"), down=set(ORDER) | {"fb"})
    assert decision.fail_open and decision.pool == "fb"
    assert decision.addresses == ("192.0.2.99",) and pools_of(decision) == ()


def test_selection_hash_makes_no_draw_per_pool() -> None:
    target = answer_lb(2, "region", selection="hash")
    answers = {decide(target, seed=s).addresses for s in range(30)}
    assert len(answers) == 1


def test_explain_names_the_pools_and_why_the_others_are_not_in_the_answer() -> None:
    decision = decide(answer_lb(2, "region"))
    trail = " ".join(decision.trail())
    assert "answer_pools 2, distinct region: one address from each of us1 " in trail
    assert ", eu 198.51.100.1" in trail
    assert decision.not_chosen["us2"] == "distinct region: ENAM already in the answer"
    assert "eu" not in decision.not_chosen
    document = decision.to_json()
    assert document["answer_pools"] == ["us1", "eu"]
    assert len(document["answer"]) == 2
    answered = {p["pool"] for p in document["pools"] if p["answered"]}
    assert answered == {"us1", "eu"}


LBS = """\
  www: {lb: web}
pools:
  us: {region: ENAM, domain: a, backends: [{name: u, address: 192.0.2.9, zone: z1}]}
  eu: {region: WEU, backends: [{name: e, address: 192.0.2.8}]}
load_balancers:
  web:
    default_pools: [us, eu]
"""


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("    distinct: region\n", "load_balancers.web.distinct: distinct needs answer_pools of 2"),
        ("    answer_pools: 9\n", "load_balancers.web.answer_pools"),
        ("    answer_pools: 2\n    distinct: regoin\n", 'did you mean "region"'),
        (
            "    answer_pools: 2\n    max_answers: 2\n",
            "max_answers 2 cannot apply too",
        ),
        (
            "    answer_pools: 2\n    distinct: domain\n",
            "distinct: domain: every pool needs one to be told apart; this pool has no domain: eu",
        ),
        (
            "    answer_pools: 2\n    distinct: zone\n",
            "this pool has a backend without a zone: eu",
        ),
    ],
)
def test_config_errors(tmp_path, extra, expected) -> None:
    reasons = check_directory(write(tmp_path, z=HEADER + LBS + extra))
    errors = [str(r) for r in reasons if not r.warning]
    assert any(expected in e for e in errors), errors
    assert any("z.yaml:" in e for e in errors)


def test_a_nested_load_balancer_cannot_be_one_of_several_pools(tmp_path) -> None:
    text = HEADER + LBS + "    answer_pools: 2\n  inner: {default_pools: [us]}\n"
    text = text.replace("default_pools: [us, eu]", "default_pools: [us, eu, 'lb:inner']")
    errors = [str(r) for r in check_directory(write(tmp_path, z=text)) if not r.warning]
    assert any("lb:inner is a load balancer, not a pool" in e for e in errors), errors


def test_fewer_regions_than_answer_pools_is_a_warning(tmp_path) -> None:
    reasons = check_directory(
        write(tmp_path, z=HEADER + LBS + "    answer_pools: 3\n    distinct: region\n")
    )
    assert [r.warning for r in reasons] == [True]
    assert "span only 2 (ENAM, WEU)" in str(reasons[0])


def test_a_valid_config_has_no_reasons(tmp_path) -> None:
    text = HEADER + LBS + "    answer_pools: 2\n    distinct: region\n"
    assert check_directory(write(tmp_path, z=text)) == []


def test_the_ecs_scope_covers_every_pool_the_answer_looked_at() -> None:
    # the second pool's zonal affinity decided its address: its client_zones prefix (16)
    # is the scope, though the first pool's answer depends on nothing
    zoned = pool(
        "z",
        [
            backend("z1", "use1-a", address="192.0.2.31"),
            backend("z2", "use1-b", address="192.0.2.32"),
        ],
        mode="STAY_WITHIN_ZONE",
        region="WEU",
    )
    plain = pool("p", [backend("p1", address="192.0.2.1")], region="ENAM")
    target = replace(lb("w", ["p", "z"]), answer_pools=2, distinct="region")
    snap = snapshot([plain, zoned], [target])
    snap = replace(
        snap,
        config=replace(
            snap.config,
            client_zones=(ClientZone(ipaddress.ip_network("10.1.0.0/16"), "use1-a"),),
        ),
        zone_regions=MappingProxyType({"use1-a": "WEU", "use1-b": "WEU"}),
    )
    client = ClientInfo(
        ipaddress.ip_address("10.1.3.0"), ecs_prefix=24, zone="use1-a", zone_prefix=16
    )
    health = view_of({("p", "p1"): True, ("z", "z1"): True, ("z", "z2"): True})
    inputs = SteeringInputs(snap, health, client, random.Random(1), NOW)
    plan = build_plan(inputs, snap.config.load_balancers["w"], QTYPE.A)
    path: list = []
    outcome = walk(compile_plan(plan, client.subnet_key()), random.Random(1), path)
    decision = describe(plan, outcome, path)
    assert decision.addresses == ("192.0.2.1", "192.0.2.31")  # the client's zone only
    assert outcome.scope == max(decision.all_scope_prefixes()) == 16
