"""Many names on load balancers configured alike: a name's first answer comes from its
class's table (dnsd.lb_classes), with the full path's bytes, in both serving loops, and
is counted under the name's own load balancer."""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from dnslib import EDNS0, DNSRecord

from dnsd import lb_classes
from dnsd.config.loader import load_config
from dnsd.explain import ecs_option
from dnsd.fastpath import AnswerCache
from dnsd.health.view import view_of
from dnsd.reply import Client
from dnsd.request import Request
from dnsd.resolve import resolve
from dnsd.snapshot import compile_snapshot
from tests.conftest import GEO, ServerThread
from tests.property.test_serving_loops import ask, both_loops, client_sockets, scraped

GEO_LBS, V6_LBS, CNAME_LBS = 40, 10, 5
NAMES = (
    [f"n{i}.alike.test" for i in range(3 * GEO_LBS)]  # three names per geo load balancer
    + [f"v{i}.alike.test" for i in range(V6_LBS)]
    + [f"c{i}.alike.test" for i in range(CNAME_LBS)]  # a CNAME answer: never shared
    + ["static.alike.test", "nope.alike.test"]
)
SUBNETS = ["81.2.69.0/24", "202.12.27.0/24", "12.0.0.0/20", "0.0.0.0/0", "2001:4860::/32"]
SOURCES = ["127.0.0.1", "81.2.69.142", "202.12.27.33", "::1"]
POOLS = {"one": "192.0.2.1", "two": "192.0.2.2", "six": "2001:db8::6", "sorry": "192.0.2.99"}


def write_config(d: Path) -> Path:
    lines = [
        "zone: alike.test",
        "soa: {mname: ns1.alike.test., rname: h.alike.test., serial: 2026120601}",
        "records:",
        '  "@": {NS: ns1.alike.test.}',
        "  ns1: {A: 192.0.2.53}",
        "  static: {A: 192.0.2.80}",
        '  n0: {lb: g0, TXT: "also text"}',
    ]
    lines += [f"  n{i}: {{lb: g{i % GEO_LBS}}}" for i in range(1, 3 * GEO_LBS)]
    lines += [f"  v{i}: {{lb: s{i}}}" for i in range(V6_LBS)]
    lines += [f"  c{i}: {{lb: h{i}}}" for i in range(CNAME_LBS)]
    lines += ["pools:"] + [
        f"  {name}: {{backends: [{{name: {name}1, address: '{address}'}}]}}"
        for name, address in POOLS.items()
    ]
    lines += ["  host: {backends: [{name: h1, address: origin.example.net}]}", "load_balancers:"]
    lines += [
        f"  g{i}: {{ttl: 30, steering: geo, default_pools: [one], region_pools: {{WEU: [two]}}, "
        "fallback_pool: sorry}"
        for i in range(GEO_LBS)
    ]
    lines += [f"  s{i}: {{ttl: 40, default_pools: [six, one]}}" for i in range(V6_LBS)]
    lines += [f"  h{i}: {{ttl: 50, default_pools: [host]}}" for i in range(CNAME_LBS)]
    (d / "alike.yaml").write_text("\n".join(lines) + "\n")
    return d


def random_query(rng: random.Random, names: list[str]) -> bytes:
    name = "".join(c.upper() if rng.random() < 0.2 else c for c in rng.choice(names))
    q = DNSRecord.question(name, rng.choice(["A", "A", "A", "AAAA", "ANY", "TXT"]))
    q.header.id = rng.randrange(65536)
    q.header.rd = rng.random() < 0.5
    if rng.random() < 0.5:
        opts = [ecs_option(rng.choice(SUBNETS))] if rng.random() < 0.3 else []
        q.add_ar(EDNS0(udp_len=rng.choice([512, 1232]), flags="", opts=opts))
    return q.pack()


def test_first_answers_of_alike_names_equal_the_full_path(tmp_path: Path) -> None:
    config, _ = load_config(write_config(tmp_path))
    snap = compile_snapshot(config, 1, geo=GEO)
    cache = AnswerCache()
    rng = random.Random(20261206)
    now = 1_800_000_000.0
    clients = {(s, t): Client(ipaddress.ip_address(s), t) for s in SOURCES for t in ("udp", "tcp")}
    compared = 0
    for round_ in range(4):
        states = {("one", "one1"): round_ != 2, ("two", "two1"): round_ != 3}
        health = view_of(states, generation=round_ + 1)
        for _ in range(600):
            wire = rng.randbytes(2) + random_query(rng, NAMES)[2:]
            client = clients[(rng.choice(SOURCES), rng.choice(["udp", "udp", "tcp"]))]
            seed = rng.randrange(1 << 30)
            full = resolve(Request(wire, client, snap, health, random.Random(seed), now))
            cached = cache.answer(wire, client, snap, health, random.Random(seed), now)
            assert cached == full, (DNSRecord.parse(wire), DNSRecord.parse(full) if full else None)
            compared += 1
    assert compared == 2400
    assert cache.shared.answered > 200, cache.shared.answered  # first answers, shared


def test_class_answers_are_counted_under_each_name_s_own_load_balancer(tmp_path: Path) -> None:
    config, _ = load_config(write_config(tmp_path))
    snap = compile_snapshot(config, 1, geo=GEO)
    cache = AnswerCache()
    health = view_of({}, generation=1)
    client = Client(ipaddress.ip_address("127.0.0.1"), "udp")
    for i in range(GEO_LBS):
        wire = DNSRecord.question(f"n{i}.alike.test").pack()
        assert cache.answer(wire, client, snap, health, random.Random(0), 0.0) == resolve(
            Request(wire, client, snap, health, random.Random(0), 0.0)
        )
    assert cache.shared.answered == GEO_LBS - 1  # all but the first from the class's table
    counted = cache.counted("lb")
    assert {key[0] for key in counted} == {f"g{i}" for i in range(1, GEO_LBS)}, counted
    assert set(counted.values()) == {1}
    # a reload forgets the tables; the counts stay, under the same load balancers
    cache.prepare(compile_snapshot(config, 2, geo=GEO), health, 0.0)
    assert cache.counted("lb") == counted
    assert not cache.shared.tables["udp"]


def test_a_load_balancer_with_a_state_of_its_own_leaves_its_class(tmp_path: Path) -> None:
    config, _ = load_config(write_config(tmp_path))
    snap = compile_snapshot(config, 1, geo=GEO)
    alike = lb_classes.members(snap, view_of({}, generation=1))
    assert alike is not None
    assert {alike.lbs[key] for key in alike.names} >= {"g0", "g3", "s1", "h2"}
    assert (
        alike.names[b"\x02n3\x05alike\x04test\x00"] == alike.names[b"\x02n0\x05alike\x04test\x00"]
    )
    own = lb_classes.members(snap, view_of({}, generation=2, trickle={"g3": 0.5}))
    assert own is not None
    assert "g3" not in own.lbs.values() and len(own.names) == len(alike.names) - 3


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[dict[str, ServerThread]]:
    with both_loops(write_config(tmp_path_factory.mktemp("alike")), tmp_path_factory) as started:
        yield started


def test_both_loops_send_the_same_bytes_for_first_and_repeated_queries(servers) -> None:
    rng = random.Random(20261207)
    socks = client_sockets()
    for srv in servers.values():
        srv.server.rng.seed(1)
    for _ in range(1200):
        wire = random_query(rng, NAMES)
        sock = socks[rng.choice(list(socks))]
        compiled = ask(sock, servers["compiled"].port, wire)
        pure = ask(sock, servers["pure"].port, wire)
        assert compiled == pure, (DNSRecord.parse(wire), compiled, pure)
    shared = {name: [c.shared for c in srv.server.caches.caches] for name, srv in servers.items()}
    # class answers are counted by both walks; `answered` counts the Python one's alone
    counted = {name: sum(sum(s.counts.values()) for s in caches) for name, caches in shared.items()}
    in_python = {name: sum(s.answered for s in caches) for name, caches in shared.items()}
    assert counted["compiled"] == counted["pure"] == in_python["pure"] > 100, (counted, in_python)
    assert in_python["compiled"] < counted["compiled"] // 10, in_python  # the C walk answered
    built = scraped(servers["compiled"])
    assert built["dnsd_compiled_loop_fallbacks_total"] == {"": 0}, built
    for sock in socks.values():
        sock.close()
