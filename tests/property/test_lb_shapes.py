"""Load balancers that each answer from pools of their own, alike but for the pools' names and
backends' addresses (dnsd.lb_shapes): a name's first answer comes from its shape's class
table with its own addresses, byte for byte the full path's, in both serving loops, for
random configurations and health states."""

from __future__ import annotations

import ipaddress
import random
import time
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
from dnsd.snapshot import compile_snapshot, with_serials
from tests.conftest import GEO, ServerThread
from tests.property.test_serving_loops import ask, both_loops, client_sockets, override, scraped

SUBNETS = ["81.2.69.0/24", "202.12.27.0/24", "12.0.0.0/20", "0.0.0.0/0"]
SOURCES = ["127.0.0.1", "81.2.69.142", "202.12.27.33", "::1"]
Slot = tuple[str, str]  # (pool, backend)


def _shape(rng: random.Random) -> dict:
    """What every load balancer of one shape has alike."""
    steering = rng.choice(["off", "off", "random", "geo"])
    return {
        "steering": steering,
        "ttl": rng.choice([30, 60]),
        "pools": [
            [(rng.random() < 0.2, rng.randint(1, 3), rng.random() < 0.15) for _ in range(rng.randint(1, 3))]
            for _ in range(rng.randint(1, 3))
        ],  # per pool, per backend: (IPv6, weight, a failover role)
        "fallback": rng.random() < 0.5,
        "max_answers": rng.choice([1, 1, 2]),
        "selection": rng.choice(["random", "random", "hash"]),
        "when_all_down": rng.choice(["fallback", "closed", "all"]),
        "trickle": 0.25 if steering == "off" and rng.random() < 0.2 else 0.0,
    }  # fmt: skip


def write_config(
    d: Path, seed: int, shapes: int = 4, per_shape: int = 12, shared_address: float = 0.1
) -> tuple[list[str], list[Slot]]:
    """Load balancers of a few random shapes, each with pools of its own (random addresses,
    a few sharing one inside a load balancer); the names and every slot."""
    rng = random.Random(seed)
    lines = [
        "zone: own.test",
        "soa: {mname: ns1.own.test., rname: h.own.test., serial: 2026120601}",
        "records:",
        '  "@": {NS: ns1.own.test.}',
        "  ns1: {A: 192.0.2.53}",
    ]
    pools, lbs, names, slots = ["pools:"], ["load_balancers:"], [], []
    for s in range(shapes):
        shape = _shape(rng)
        for i in range(per_shape):
            lb = f"s{s}m{i}"
            refs = []
            kinds = [*shape["pools"], *([[(False, 1, False)]] if shape["fallback"] else [])]
            given: list[str] = []
            for k, backends in enumerate(kinds):
                pool = f"{lb}p{k}"
                refs.append(pool)
                rows = []
                for j, (v6, weight, failover) in enumerate(backends):
                    if given and rng.random() < shared_address and (":" in given[0]) == v6:
                        address = given[0]  # two slots, one address
                    elif v6:
                        address = (
                            f"2001:db8:{rng.randrange(1, 65535):x}::{rng.randrange(1, 65535):x}"
                        )
                    else:
                        address = (
                            f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
                        )
                    given.append(address)
                    role = ", role: failover" if failover else ""
                    role += (
                        f", port: {rng.randrange(1024, 65536)}"  # probed there: no shape of its own
                    )
                    rows.append(f"{{name: b{j}, address: '{address}', weight: {weight}{role}}}")
                    slots.append((pool, f"b{j}"))
                pools.append(f"  {pool}: {{backends: [{', '.join(rows)}]}}")
            default = refs[: len(shape["pools"])]
            fields = [f"ttl: {shape['ttl']}", f"steering: {shape['steering']}",
                      f"default_pools: [{', '.join(default)}]",
                      f"max_answers: {shape['max_answers']}", f"selection: {shape['selection']}",
                      f"when_all_down: {shape['when_all_down']}"]  # fmt: skip
            if shape["fallback"]:
                fields.append(f"fallback_pool: {refs[-1]}")
            if shape["steering"] == "geo":
                fields.append(f"region_pools: {{WEU: [{default[-1]}]}}")
            if shape["trickle"]:
                fields.append(f"trickle_ratio: {shape['trickle']}")
            lbs.append(f"  {lb}: {{{', '.join(fields)}}}")
            lines.append(f"  {lb}: {{lb: {lb}}}")
            names.append(f"{lb}.own.test")
    (d / "own.yaml").write_text("\n".join([*lines, *pools, *lbs]) + "\n")
    return names, slots


def random_query(rng: random.Random, names: list[str]) -> bytes:
    name = "".join(c.upper() if rng.random() < 0.2 else c for c in rng.choice(names))
    q = DNSRecord.question(name, rng.choice(["A", "A", "A", "AAAA", "ANY"]))
    q.header.id = rng.randrange(65536)
    q.header.rd = rng.random() < 0.5
    if rng.random() < 0.5:
        opts = [ecs_option(rng.choice(SUBNETS))] if rng.random() < 0.3 else []
        q.add_ar(EDNS0(udp_len=rng.choice([512, 1232]), flags="", opts=opts))
    return q.pack()


@pytest.mark.parametrize("seed", range(10))
def test_first_answers_of_own_pool_names_equal_the_full_path(tmp_path: Path, seed: int) -> None:
    names, slots = write_config(tmp_path, seed)
    config, _ = load_config(tmp_path)
    snap = compile_snapshot(config, 1, geo=GEO)
    up = lb_classes.members(snap, view_of({}, generation=1))
    assert (
        up is not None
    )  # a few classes (a shape, slots sharing an address or not), not one per name
    assert len({value[: 1 + value[0]] for value in up.names.values()}) < len(names) // 2
    cache = AnswerCache()
    rng = random.Random(seed)
    now = 1_800_000_000.0
    clients = {(s, t): Client(ipaddress.ip_address(s), t) for s in SOURCES for t in ("udp", "tcp")}
    for round_ in range(5):
        # most slots up; a few down, so members of one shape differ in their health
        states = {slot: rng.random() > (0.0 if round_ == 0 else 0.25) for slot in slots}
        pools = {pool: "down" for pool, _ in slots if rng.random() < 0.03}
        health = view_of(states, pools=pools, generation=round_ + 1)
        for _ in range(300):
            wire = random_query(rng, names)
            client = clients[(rng.choice(SOURCES), rng.choice(["udp", "udp", "tcp"]))]
            draws = rng.randrange(1 << 30)
            full = resolve(Request(wire, client, snap, health, random.Random(draws), now))
            cached = cache.answer(wire, client, snap, health, random.Random(draws), now)
            assert cached == full, (DNSRecord.parse(wire), DNSRecord.parse(full) if full else None)
    assert cache.shared.answered > 10, cache.shared.answered  # first answers from a class


def test_a_member_whose_backend_is_down_is_in_another_class(tmp_path: Path) -> None:
    names, slots = write_config(tmp_path, 7, shapes=1, per_shape=3, shared_address=0.0)
    config, _ = load_config(tmp_path)
    snap = compile_snapshot(config, 1, geo=GEO)
    up = lb_classes.members(snap, view_of({}, generation=1))
    assert up is not None
    wires = [lb_classes._wire(name + ".") for name in names]
    tag = [up.names[w][: 1 + up.names[w][0]] for w in wires]
    assert tag[0] == tag[1] == tag[2]  # one shape, all up: one class
    assert len({up.names[w][1 + up.names[w][0] :] for w in wires}) == 3  # three address vectors
    down = view_of({slots[0]: False}, generation=2)  # the first member's first backend
    after = lb_classes.members(snap, down, up)
    assert after is not None
    moved = [after.names[w][: 1 + after.names[w][0]] for w in wires]
    assert moved[0] != moved[1] == moved[2] == tag[1]
    assert lb_classes.members(snap, down) is not None
    assert lb_classes.members(snap, down).names == after.names  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[tuple[dict[str, ServerThread], list[str], list[Slot]]]:
    config_dir = tmp_path_factory.mktemp("own")
    names, slots = write_config(config_dir, 11, shapes=5, per_shape=30)
    with both_loops(config_dir, tmp_path_factory) as started:
        yield started, names, slots


def test_both_loops_send_the_same_bytes_for_own_pool_names(servers) -> None:
    started, names, slots = servers
    rng = random.Random(20261208)
    socks = client_sockets()
    downed: list[Slot] = []
    for round_ in range(3):
        changes = [(p, b, None) for p, b in downed]
        downed = [slot for slot in slots if rng.random() < 0.2] if round_ else []
        changes += [(p, b, "down") for p, b in downed]
        for srv in started.values():
            override(srv, changes)
            srv.server.rng.seed(round_)
        time.sleep(0.3)  # the new health view reaches both UDP threads
        for _ in range(500):
            wire = random_query(rng, names)
            sock = socks[rng.choice(list(socks))]
            compiled = ask(sock, started["compiled"].port, wire)
            pure = ask(sock, started["pure"].port, wire)
            assert compiled is not None
            assert compiled == pure, (DNSRecord.parse(wire), compiled, pure)
    shared = {name: [c.shared for c in srv.server.caches.caches] for name, srv in started.items()}
    counted = {name: sum(sum(s.counts.values()) for s in caches) for name, caches in shared.items()}
    in_python = {name: sum(s.answered for s in caches) for name, caches in shared.items()}
    # the counts start again with each health view: the last round's, counted by both walks
    assert counted["compiled"] == counted["pure"] > 20, (counted, in_python)
    assert in_python["pure"] > 100, in_python
    assert in_python["compiled"] < in_python["pure"] // 10, in_python  # the C walk answered
    built = scraped(started["compiled"])
    assert built["dnsd_compiled_loop_fallbacks_total"] == {"": 0}, built
    for sock in socks.values():
        sock.close()


def test_a_snapshot_with_new_serials_keeps_its_members(tmp_path: Path) -> None:
    write_config(tmp_path, 3)
    config, _ = load_config(tmp_path)
    snap = compile_snapshot(config, 1, geo=GEO)
    lb_classes.prepare(snap)
    made = snap.derived.peek("lb classes").members
    assert made is not None and made.lbs
    (apex,) = snap.zones
    stamped = with_serials(snap, {apex: 2026120699})
    assert stamped is not snap
    assert lb_classes._made_for(stamped) is made  # served from the first query: not made again
    assert lb_classes._made_for(compile_snapshot(config, 2, geo=GEO)) is None  # a reload's own


def test_many_names_are_tagged_in_a_thread_of_their_own(tmp_path: Path) -> None:
    names, slots = write_config(tmp_path, 5, shapes=4, per_shape=130)  # over SYNC_NAMES
    config, _ = load_config(tmp_path)
    snap = compile_snapshot(config, 1, geo=GEO)
    health = view_of({slot: i % 7 != 0 for i, slot in enumerate(slots)}, generation=1)
    tables = lb_classes.ClassTables()
    tables.refresh(snap, health)
    deadline = time.monotonic() + 30
    while not tables.members.names:
        assert time.monotonic() < deadline, "the members were never tagged"
        time.sleep(0.01)
        tables.poll()
    assert len(tables.members.names) == len(names) > lb_classes.SYNC_NAMES
    assert tables.members.names == lb_classes.members(snap, health).names  # type: ignore[union-attr]
    later = view_of({slot: i % 5 != 0 for i, slot in enumerate(slots)}, generation=2)
    tables.refresh(snap, later)  # only the pools whose health changed are tagged again
    while tables.members.health is not later:
        assert time.monotonic() < deadline, "the members were never tagged again"
        time.sleep(0.01)
        tables.poll()
    assert tables.members.names == lb_classes.members(snap, later).names  # type: ignore[union-attr]
