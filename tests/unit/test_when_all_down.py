"""`when_all_down` (docs/steering.md, when all pools are down): the key validated, and the
decision each rule makes when nothing is healthy, the fallback included — and that no rule
applies while anything the name could answer from is healthy."""

from __future__ import annotations

import ipaddress
import json
import random
import time
from dataclasses import replace
from types import MappingProxyType

import pytest
from dnslib import QTYPE, RCODE, DNSRecord

from dnsd.admin.active_pool_watch import moves
from dnsd.admin.region_map import region_facts
from dnsd.admin.status import all_down_rule
from dnsd.config.loader import check_directory, load_config
from dnsd.health.store import HealthStore
from dnsd.health.view import BackendHealth, view_of
from dnsd.reply import Client
from dnsd.request import Request
from dnsd.resolve import resolve
from dnsd.serve.last_good import LastGood, from_json, remembered, to_json
from dnsd.snapshot import SnapshotHolder, compile_snapshot
from dnsd.steering import SteeringInputs, steer
from tests.builders import backend, lb, pool
from tests.unit.test_config_check import HEADER, POOL, write
from tests.unit.test_steering import ADDRESS, CLIENT, NOW, POOLS, located, run, snapshot

EVERYTHING = {"p1", "p2", "p3", "fb"}


def with_rule(rule: str, **kw):
    return replace(lb("w", ["p1", "p2"], fallback="fb", **kw), when_all_down=rule)


@pytest.mark.parametrize("policy", ["off", "random", "dynamic", "geo", "proximity"])
def test_fallback_is_the_default_and_answers_regardless_of_health(policy) -> None:
    decision = run([lb("w", ["p1", "p2"], steering=policy, fallback="fb")], down=EVERYTHING)
    assert decision.pool == "fb" and decision.fail_open and decision.when_all_down == "fallback"
    assert "when_all_down fallback" in " ".join(decision.trail())
    assert decision.to_json()["when_all_down"] == "fallback"


@pytest.mark.parametrize("rule", ["closed", "servfail"])
@pytest.mark.parametrize("policy", ["off", "random", "geo"])
def test_closed_and_servfail_answer_nothing_from_any_pool(rule, policy) -> None:
    decision = run([with_rule(rule, steering=policy)], down=EVERYTHING)
    assert decision.pool is None and decision.addresses == () and decision.fail_open
    assert decision.all_down_rule() == rule
    assert f"when_all_down {rule}" in " ".join(decision.trail())
    assert decision.to_json()["answer"] == []


@pytest.mark.parametrize("rule", ["closed", "servfail", "all", "last_good"])
def test_no_rule_while_the_fallback_is_healthy(rule) -> None:
    decision = run([with_rule(rule)], down={"p1", "p2"})
    assert decision.pool == "fb" and not decision.fail_open
    assert decision.all_down_rule() is None


def test_all_answers_every_enabled_address_of_the_asked_family() -> None:
    pools = [
        pool("p1", [backend("p1-1", address="192.0.2.1"), backend("p1-6", address="2001:db8::1"),
                    backend("p1-off", address="192.0.2.7", enabled=False)]),
        pool("p2", [backend("p2-1", address="192.0.2.2"), backend("p2-d", address="192.0.2.8")]),
        pool("fb", [backend("fb-1", address="192.0.2.99")]),
    ]  # fmt: skip
    drained = BackendHealth(healthy=False, probed="unhealthy", override="drain")
    states = {("p1", "p1-1"): False, ("p1", "p1-6"): False, ("p2", "p2-1"): False,
              ("p2", "p2-d"): drained, ("fb", "fb-1"): False}  # fmt: skip
    snap = snapshot(pools, [with_rule("all")])
    target = snap.config.load_balancers["w"]
    for qtype, expected in ((QTYPE.A, ("192.0.2.1", "192.0.2.2", "192.0.2.99")),
                            (QTYPE.AAAA, ("2001:db8::1",))):  # fmt: skip
        inputs = SteeringInputs(snap, view_of(states), CLIENT, random.Random(1), NOW)
        decision = steer(inputs, target, qtype)
        assert decision.addresses == expected and decision.all_down_rule() == "all"


def test_nested_rule_is_the_inner_load_balancers_when_the_outer_falls_back_to_it() -> None:
    inner = replace(lb("inner", ["p3"]), when_all_down="closed")
    outer = lb("w", ["p1"], fallback="lb:inner")
    decision = run([outer, inner], down=EVERYTHING)
    assert decision.path() == ["lb:inner"] and decision.all_down_rule() == "closed"
    assert decision.innermost().addresses == ()


def test_outer_rule_applies_when_its_nested_pool_is_down_too() -> None:
    inner = lb("inner", ["p3"])
    outer = replace(lb("w", ["p1", "lb:inner"]), when_all_down="servfail")
    assert run([outer, inner], down=EVERYTHING).all_down_rule() == "servfail"
    assert run([outer, inner], down={"p1"}).innermost().pool == "p3"


ZONE = HEADER + "  www: {lb: w}\n" + POOL + "load_balancers:\n  w: {default_pools: [p]%s}\n"


@pytest.mark.parametrize("rule", ["fallback", "closed", "servfail", "all", "last_good"])
def test_every_rule_is_accepted(tmp_path, rule) -> None:
    config, _ = load_config(write(tmp_path, z=ZONE % f", when_all_down: {rule}"))
    assert config.load_balancers["w"].when_all_down == rule


def test_default_is_fallback(tmp_path) -> None:
    config, _ = load_config(write(tmp_path, z=ZONE % ""))
    assert config.load_balancers["w"].when_all_down == "fallback"


@pytest.mark.parametrize(("value", "words"), [
    ("close", "'close' is not one of fallback, closed, servfail, all, last_good (did you mean \"closed\"?)"),
    ("[closed]", "is not one of"),
    ("true", "is not one of"),
])  # fmt: skip
def test_a_bad_value_names_file_line_and_path(tmp_path, value, words) -> None:
    reasons = check_directory(write(tmp_path, z=ZONE % f", when_all_down: {value}"))
    errors = [str(r) for r in reasons if not r.warning]
    assert len(errors) == 1 and errors[0].startswith(
        f"{tmp_path}/z.yaml:10: load_balancers.w.when_all_down: "
    )
    assert words in errors[0], errors


def reply(snap, health, qtype: str) -> DNSRecord:
    wire = bytes(DNSRecord.question("www.t.test", qtype).pack())
    client = Client(ipaddress.ip_address("127.0.0.1"), "udp")
    return DNSRecord.parse(resolve(Request(wire, client, snap, health, random.Random(1), NOW)))


@pytest.mark.parametrize("qtype", ["A", "AAAA", "ANY"])
def test_closed_is_nodata_with_the_soa_at_the_lb_ttl_and_servfail_is_servfail(
    tmp_path, qtype
) -> None:
    text = ZONE.replace("soa: {", "soa: {minimum: 900, ") % ", ttl: 4, when_all_down: %s"
    down = view_of({("p", "b"): False})
    for rule in ("closed", "servfail"):
        config, _ = load_config(write(tmp_path, z=text % rule))
        got = reply(compile_snapshot(config, 1), down, qtype)
        assert got.rr == [] and got.ar == []
        if rule == "closed":
            assert got.header.rcode == RCODE.NOERROR and got.header.aa == 1
            assert [(r.rtype, r.ttl) for r in got.auth] == [(QTYPE.SOA, 4)]
        else:
            assert got.header.rcode == RCODE.SERVFAIL and got.auth == []
    healthy = reply(compile_snapshot(config, 1), view_of({("p", "b"): True}), qtype)
    assert healthy.header.rcode == RCODE.NOERROR  # healthy: no rule
    if qtype == "AAAA":  # the pool has no IPv6 address: the zone's own negative TTL
        assert healthy.rr == [] and [r.ttl for r in healthy.auth] == [900]
    else:
        assert [str(r.rdata) for r in healthy.rr] == ["192.0.2.9"]


def test_the_pools_listed_in_the_fixture_are_the_ones_taken_down() -> None:
    assert {p.name for p in POOLS} == EVERYTHING == set(ADDRESS)


# -- what names the rule: the status chains, the fail_open event ------------------------
def nested_config(tmp_path):
    text = (
        HEADER
        + "  www: {lb: w}\n"
        + POOL
        + (
            "load_balancers:\n"
            "  w: {default_pools: [p], fallback_pool: 'lb:inner', when_all_down: servfail}\n"
            "  inner: {default_pools: [p], when_all_down: closed}\n"
        )
    )
    config, _ = load_config(write(tmp_path, z=text))
    return config


def test_the_rule_of_a_status_chain(tmp_path) -> None:
    config = nested_config(tmp_path)
    w = config.load_balancers["w"]
    assert all_down_rule(config, w, "p") is None  # something healthy answers
    assert all_down_rule(config, w, "p (fail open)") == "fallback"
    assert all_down_rule(config, w, " (fail open)") == "servfail"  # no pool: w's own rule
    assert all_down_rule(config, w, "lb:inner (fail open)") == "closed"
    assert all_down_rule(config, w, "lb:inner -> p (fail open)") == "fallback"


def test_the_fail_open_event_names_the_rule_per_region(tmp_path) -> None:
    config = nested_config(tmp_path)
    before = {"w": ({"WEU": "p", "NEAS": "p"}, [])}
    after = {"w": ({"WEU": " (fail open)", "NEAS": "lb:inner (fail open)"}, ["WEU", "NEAS"])}
    events = moves(before, after, frozenset(), NOW, "HTTP 503", "probe", config)
    [opened] = [e for e in events if e.kind == "fail_open"]
    assert opened.details["when_all_down"] == {"NEAS": "closed", "WEU": "servfail"}
    assert opened.to_json()["when_all_down"] == {"NEAS": "closed", "WEU": "servfail"}
    assert opened.regions == ("NEAS", "WEU") and opened.pool is None  # no pool answers
    without = moves(before, after, frozenset(), NOW, "HTTP 503", "probe")
    assert "when_all_down" not in next(e for e in without if e.kind == "fail_open").details


# -- last_good: the remembered answer, and the file it is kept in -----------------------
def lg_snapshot():
    return snapshot(POOLS, [with_rule("last_good")])


def lg_view(down, entries):
    view = view_of({(p, f"{p}-1"): p not in down for p in ADDRESS})
    return replace(view, last_good=MappingProxyType(entries))


def test_last_good_answers_the_remembered_answer_of_the_clients_region() -> None:
    snap = lg_snapshot()
    target = snap.config.load_balancers["w"]
    entries = {
        ("w", "WEU", QTYPE.A): (("192.0.2.2",), None),
        ("w", "", QTYPE.A): (("192.0.2.1",), None),
    }
    for client, expected in ((located("GB", "WEU"), ("192.0.2.2",)), (CLIENT, ("192.0.2.1",))):
        inputs = SteeringInputs(snap, lg_view(EVERYTHING, entries), client, random.Random(1), NOW)
        decision = steer(inputs, target, QTYPE.A)
        assert decision.addresses == expected and decision.pool is None
        assert decision.all_down_rule() == "last_good" and decision.fail_open
        assert "when_all_down last_good" in " ".join(decision.trail())
    weu = SteeringInputs(
        snap, lg_view(EVERYTHING, entries), located("GB", "WEU"), random.Random(1), NOW
    )
    assert steer(weu, target, QTYPE.A).all_scope_prefixes() == [24]  # it depends on the region


def test_last_good_without_a_remembered_answer_is_the_fallback_rule() -> None:
    decision = run([with_rule("last_good")], down=EVERYTHING)
    assert decision.pool == "fb" and decision.all_down_rule() == "fallback"
    other_family = {("w", "", QTYPE.AAAA): (("2001:db8::1",), None)}
    snap = lg_snapshot()
    inputs = SteeringInputs(snap, lg_view(EVERYTHING, other_family), CLIENT, random.Random(1), NOW)
    assert steer(inputs, snap.config.load_balancers["w"], QTYPE.A).pool == "fb"


def test_remembered_records_healthy_answers_and_keeps_them_while_all_down() -> None:
    snap = lg_snapshot()
    first = remembered(snap, lg_view({"p1"}, {}), NOW)
    assert first[("w", "WEU", QTYPE.A)] == (("192.0.2.2",), None)  # p1 down: p2 answers
    assert first[("w", "", QTYPE.AAAA)] == ((), None)  # no IPv6 address: NODATA was given
    assert len(first) == 14 * 2  # 13 regions and the unplaced, A and AAAA
    kept = remembered(snap, lg_view(EVERYTHING, first), NOW)
    assert kept == first  # nothing healthy: nothing replaced
    stale = {("gone", "", QTYPE.A): (("192.0.2.9",), None), **first}
    assert ("gone", "", QTYPE.A) not in remembered(snap, lg_view(EVERYTHING, stale), NOW)


def test_the_file_round_trips_and_a_bad_one_is_refused(tmp_path) -> None:
    entries = {("w", "WEU", QTYPE.A): (("192.0.2.2", "192.0.2.3"), None),
               ("w", "", QTYPE.AAAA): ((), None), ("v", "", QTYPE.A): ((), "origin.example.")}  # fmt: skip
    assert from_json(to_json(entries)) == entries
    bad = [
        "[]", '{"version": 2, "answers": []}', '{"version": 1, "answers": {}}',
        '{"version": 1, "answers": [{"lb": "w", "region": "MARS", "type": "A", "addresses": []}]}',
        '{"version": 1, "answers": [{"lb": "w", "region": "", "type": "A", "addresses": ["2001:db8::1"]}]}',
        '{"version": 1, "answers": [{"lb": "w", "region": "", "type": "MX", "addresses": []}]}',
        '{"version": 1, "answers": [{"lb": "", "region": "", "type": "A", "addresses": []}]}',
        '{"version": 1, "answers": [{"lb": "w", "region": "", "type": "A", "addresses": '
        + json.dumps(["192.0.2.1"] * 65) + "}]}",
    ]  # fmt: skip
    for text in bad:
        with pytest.raises(ValueError):
            from_json(text)


def test_load_reads_the_file_into_the_view_and_ignores_a_bad_or_huge_one(tmp_path) -> None:
    snap = lg_snapshot()
    entries = {("w", "", QTYPE.A): (("192.0.2.2",), None)}
    store = HealthStore()
    store.set_snapshot(snap)
    keeper = LastGood(SnapshotHolder(snap), store, tmp_path)
    (tmp_path / "last_good.json").write_text(to_json(entries))
    assert keeper.load() == 1 and dict(store.view.last_good) == entries
    for text in ("not json", to_json(entries) + " " * (4 << 20)):
        (tmp_path / "last_good.json").write_text(text)
        fresh = HealthStore()
        assert LastGood(SnapshotHolder(snap), fresh, tmp_path).load() == 0
        assert dict(fresh.view.last_good) == {}


def test_on_view_records_once_per_states_change_and_writes_the_file(tmp_path) -> None:
    snap = lg_snapshot()
    store = HealthStore()
    store.set_snapshot(snap)
    keeper = LastGood(SnapshotHolder(snap), store, tmp_path, clock=lambda: NOW)
    store.view = lg_view({"p1"}, {})
    keeper.on_view(store.view)
    assert store.view.last_good[("w", "", QTYPE.A)] == (("192.0.2.2",), None)
    deadline = time.monotonic() + 5
    while keeper.writes < 1:
        assert time.monotonic() < deadline, "never written"
        time.sleep(0.01)
    keeper.flush()
    assert from_json((tmp_path / "last_good.json").read_text()) == dict(store.view.last_good)
    before = store.view
    keeper.on_view(before)  # the same states: nothing steered, nothing replaced
    assert store.view is before


def test_an_answer_from_a_backend_not_probed_yet_is_not_remembered() -> None:
    snap = lg_snapshot()
    unknown = BackendHealth(healthy=True, probed="unknown")  # a start: only `initial`
    view = view_of({("p1", "p1-1"): unknown, ("p2", "p2-1"): False, ("fb", "fb-1"): False})
    kept = {("w", "", QTYPE.A): (("192.0.2.2",), None)}
    assert remembered(snap, replace(view, last_good=MappingProxyType(kept)), NOW) == kept


def test_a_pool_change_steers_only_the_load_balancers_that_use_it(tmp_path) -> None:
    lbs = [with_rule("last_good"), replace(lb("v", ["p3"]), when_all_down="last_good")]
    snap = snapshot(POOLS, lbs)
    store = HealthStore()
    store.set_snapshot(snap)
    keeper = LastGood(SnapshotHolder(snap), store, None, clock=lambda: NOW)
    store.view = lg_view(set(), {})
    keeper.on_view(store.view)  # the first view: every one
    assert store.view.last_good[("v", "", QTYPE.A)] == (("192.0.2.3",), None)
    marked = {**store.view.last_good, ("v", "", QTYPE.A): (("192.0.2.250",), None)}
    view = replace(lg_view({"p1"}, marked), states_generation=store.view.states_generation + 1)
    store.view = view
    keeper.on_view(view)  # p1 changed: w steered again, v (p3 only) not
    assert store.view.last_good[("w", "", QTYPE.A)] == (("192.0.2.2",), None)
    assert store.view.last_good[("v", "", QTYPE.A)] == (("192.0.2.250",), None)


def test_the_status_region_map_says_which_rule_answers() -> None:
    lb_doc = {"name": "w", "default_pools": ["p"], "fallback_pool": None, "failed_over": [],
              "first_choice": {}, "active": {"WEU": " (fail open)", "EEU": "p (fail open)"},
              "all_down": {"WEU": "closed", "EEU": "fallback"}}  # fmt: skip
    why = {f.region: f.why for f in region_facts(lb_doc, lambda first: (False, ""))}
    assert why == {"WEU": "nothing healthy: when_all_down closed answers",
                   "EEU": "nothing healthy: answered from the fallback"}  # fmt: skip
