"""The answer cache and the full path give identical bytes: thousands of random
queries — case, EDNS, DO, ECS, RD/CD, UDP and TCP — across health changes and reloads,
each answered twice with identically seeded random sources."""

from __future__ import annotations

import ipaddress
import random
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest
from dnslib import EDNS0, DNSRecord, EDNSOption

from dnsd.config.loader import load_config
from dnsd.cookies import ServerCookies
from dnsd.dnssec.apex import with_keys
from dnsd.dnssec.keys import ensure_keys
from dnsd.explain import ecs_option
from dnsd.fastpath import AnswerCache
from dnsd.health.view import BackendHealth, RampStart, RttSample, TrickleRamp, view_of
from dnsd.reply import Client
from dnsd.request import Request
from dnsd.resolve import resolve
from dnsd.snapshot import Snapshot, compile_snapshot
from tests.conftest import DATA, GEO
from tests.property.test_fuzz_resolve import udp_limit
from tests.tiers import FAST, examples

NAMES = [
    "fast.test", "mail.fast.test", "alias.fast.test", "x.wild.fast.test", "a.b.wild.fast.test",
    "host.sub.fast.test", "nope.fast.test", "rnd.fast.test", "geo.fast.test", "sticky.fast.test",
    "nested.fast.test", "zonal.fast.test", "host.fast.test", "example.org", "trickled.fast.test",
    "dyn.fast.test", "shut.fast.test", "sf.fast.test", "every.fast.test", "remember.fast.test",
    "ramped.fast.test", "fall.fast.test",
    "spread.fast.test", "zoned.fast.test", "racks.fast.test", "wrap.fast.test",
    "geo-b.fast.test", "geo2.fast.test", "geo3.fast.test", "sticky2.fast.test", "host2.fast.test",
    "shut2.fast.test",
]  # fmt: skip
# `remember` (when_all_down: last_good): answers remembered for some regions, not others
LAST_GOOD = MappingProxyType({
    ("remember", "WEU", 1): (("198.51.100.77",), None), ("remember", "", 1): (("192.0.2.77",), None),
    ("remember", "", 28): (("2001:db8::77",), None), ("remember", "NEAS", 1): ((), "gone.example."),
})  # fmt: skip
TYPES = ["A", "AAAA", "TXT", "MX", "ANY", "CNAME", "SOA", "NS"]
# HTTPS/SVCB at a load-balanced name take the full path (hints steered per query): asked
# less often, so the cache's share of the other questions stays what the hits check needs
SVC_TYPES = ["HTTPS", "SVCB"]
SUBNETS = ["81.2.69.0/24", "202.12.27.0/24", "12.0.0.0/20", "10.1.3.0/24", "10.2.0.0/16", "0.0.0.0/0",
           "2001:4860::/32", "41.0.0.0/22", "9.9.9.0/24"]  # fmt: skip
SOURCES = ["127.0.0.1", "81.2.69.142", "10.2.9.9", "202.12.27.33", "::1", "2a00:1450::1"]
BACKENDS = ["a1", "a2", "a6", "b1", "b2", "c1", "z1", "z2", "z3", "z4", "y1", "y2"]


def ramps_in_force(rng: random.Random, now: float) -> dict[str, MappingProxyType]:
    """Ramps of `ramped` and `fall` starting around `now`: their steps end while the
    queries go on (the clock moves 6.5 s a round), so cached plans must end with them."""
    regions = ["", "WEU", "ENAM", "NEAS"]
    ramps = {}
    for region in regions:
        ramps[("ramped", region)] = RampStart(now + rng.uniform(-1, 1), *rng.sample("abc", 2))
    ramps[("fall", "")] = RampStart(now + rng.uniform(-1, 1), "b", "a")
    trickles = {"ramped": TrickleRamp(now + rng.uniform(-1, 1), 0.0, 0.2)}
    return {"ramps": MappingProxyType(ramps), "trickle_ramps": MappingProxyType(trickles)}


def admits(rng: random.Random) -> MappingProxyType:
    """The capacity waterfall's shares of one publication (dnsd.serve.pool_load)."""
    return MappingProxyType({"a": rng.choice([1.0, 0.5, 0.2, 0.0]), "b": rng.choice([1.0, 0.4])})


def random_query(rng: random.Random) -> bytes:
    name = "".join(c.upper() if rng.random() < 0.3 else c for c in rng.choice(NAMES))
    qtype = rng.choice(SVC_TYPES) if rng.random() < 0.08 else rng.choice(TYPES)
    q = DNSRecord.question(name, qtype)
    q.header.id = rng.randrange(65536)
    q.header.rd = rng.random() < 0.5
    q.header.cd = rng.random() < 0.2
    if rng.random() < 0.7:
        opts = [ecs_option(rng.choice(SUBNETS))] if rng.random() < 0.6 else []
        if rng.random() < 0.3:  # a cookie (as dig sends): the reply gets a server cookie
            opts.append(EDNSOption(10, rng.randbytes(rng.choice([8, 8, 24]))))
        q.add_ar(
            EDNS0(
                udp_len=rng.choice([512, 1232, 4096]),
                flags="do" if rng.random() < 0.3 else "",
                opts=opts,
            )
        )
    return q.pack()


def with_rtts(
    states: dict[tuple[str, str], bool], rng: random.Random, now: float
) -> dict[tuple[str, str], BackendHealth]:
    """The same verdicts with fresh RTT samples from a few regions (some too few, some
    old), as a probe round would publish them."""
    out = {}
    for key, healthy in states.items():
        rtt = {
            region: RttSample(
                ewma_ms=rng.uniform(5, 200),
                samples=rng.choice([1, 2, 5]),
                last_at=now - rng.choice([0.0, 0.5, 3.0]),
            )
            for region in ("ENAM", "WEU", "NEAS")
            if rng.random() < 0.7
        }
        out[key] = BackendHealth(
            healthy=healthy,
            probed="healthy" if healthy else "unhealthy",
            rtt=MappingProxyType(rtt),
        )
    return out


def signed(snap: Snapshot, key_dir: Path) -> Snapshot:
    """The snapshot with every zone signed online (DNSSEC)."""
    return with_keys(snap, {name: ensure_keys(key_dir, name, 13, True) for name in snap.zones})


def answering_cookies(snap: Snapshot) -> Snapshot:
    """The snapshot of a server that answers DNS cookies, as `dnsd serve` runs."""
    return replace(snap, node=replace(snap.node, cookies=ServerCookies(b"k" * 32)))


@pytest.mark.parametrize("dnssec", [False, True], ids=["unsigned", "signed"])
def test_cached_and_full_path_agree_byte_for_byte(dnssec: bool, tmp_path: Path) -> None:
    rng = random.Random(20261130)
    config, _ = load_config(DATA / "fast")
    snap = answering_cookies(compile_snapshot(config, 1, geo=GEO))
    if dnssec:  # DO=1 replies are signed: the cache keeps signed bytes, equal to the full path's
        snap = signed(snap, tmp_path)
    cache = AnswerCache()
    health = view_of({}, generation=1)
    now = 1_800_000_000.0
    compared = 0
    recent: list[bytes] = []
    clients: dict[tuple[str, str], Client] = {}
    for round_ in range(12):
        if round_ % 3 == 2:  # a reload: a new generation of the same config
            snap = answering_cookies(compile_snapshot(config, snap.generation + 1, geo=GEO))
            if dnssec:
                snap = signed(snap, tmp_path)
        states = {
            (p.name, b): rng.random() < 0.75
            for p in config.pools.values()
            for b in [x.name for x in p.backends]
        }
        trickle = {"rnd": 0.5} if round_ % 4 == 3 else None
        states_generation = health.generation + 1
        moves = ramps_in_force(rng, now)  # ramps start with the states (docs/steering.md)
        for step in range(examples(500)):
            if step % 100 == 0:  # new RTTs only (as a probe round publishes): same states
                health = view_of(
                    with_rtts(states, rng, now),
                    generation=health.generation + 1,
                    states_generation=states_generation,
                    trickle=trickle,
                )
                health = replace(
                    health, last_good=LAST_GOOD, **moves, pool_admit=admits(rng)
                )  # when_all_down: last_good; ramps; the waterfall's shares (each publication)
            now += 0.013  # RTT samples age past rtt_max_age (1s) between publications
            if recent and rng.random() < 0.5:  # the same query again, with another ID
                wire = rng.randbytes(2) + rng.choice(recent)[2:]
            else:
                wire = bytes(random_query(rng))
                recent = [*recent[-40:], wire]
            key = (rng.choice(SOURCES), rng.choice(["udp", "udp", "tcp"]))
            if key not in clients:  # listeners keep one Client per source, as here
                clients[key] = Client(ipaddress.ip_address(key[0]), key[1])
            client = clients[key]
            seed = rng.randrange(1 << 30)
            full = resolve(Request(wire, client, snap, health, random.Random(seed), now))
            cached = cache.answer(wire, client, snap, health, random.Random(seed), now)
            assert cached == full, (DNSRecord.parse(wire), DNSRecord.parse(full) if full else None)
            if full is not None and client.transport == "udp":  # signed replies fit too (or TC)
                assert len(full) <= udp_limit(wire)
            compared += 1
    assert compared == 12 * examples(500)
    assert cache.hits > (compared // 10 if FAST else 1800)  # the cache was really used
    memos = [m for m in cache.memos("udp").values() if not isinstance(m, bytes)]
    assert any(m.tree is not None and any(m.tails) for m in memos)  # compiled draws answered


def test_cached_answers_follow_health_changes() -> None:
    config, _ = load_config(DATA / "fast")
    snap = compile_snapshot(config, 1, geo=GEO)
    cache = AnswerCache()
    wire = DNSRecord.question("geo.fast.test").pack()
    client = Client(ipaddress.ip_address("127.0.0.1"), "udp")
    up = view_of({}, generation=1)
    down = view_of({("a", "a1"): False, ("a", "a2"): False, ("a", "a6"): False}, generation=2)

    def answers(health) -> set[str]:
        return {
            str(
                DNSRecord.parse(cache.answer(wire, client, snap, health, random.Random(1), 0.0))
                .rr[0]
                .rdata
            )
            for _ in range(20)
        }  # type: ignore[arg-type]

    assert answers(up) <= {"192.0.2.10", "192.0.2.11"}
    assert answers(down) == {"203.0.113.200"}  # the a pool is down: fallback, at once


@pytest.mark.parametrize("name", ["mail.fast.test", "geo.fast.test"], ids=["static", "lb"])
def test_queries_with_a_cookie_are_answered_from_the_cache(name: str) -> None:
    """`dig` sends a client cookie by default (a new one per run): such queries are cache
    hits too, and each reply carries its own client's cookie with a fresh server cookie —
    the same bytes as the full path."""
    config, _ = load_config(DATA / "fast")
    snap = answering_cookies(compile_snapshot(config, 1, geo=GEO))
    cookies = snap.node.cookies
    assert cookies is not None
    cache, health = AnswerCache(), view_of({}, generation=1)
    client = Client(ipaddress.ip_address("81.2.69.142"), "udp")
    now = 1_800_000_000.0
    for run in range(4):
        mine = bytes([run]) * 8
        q = DNSRecord.question(name)
        q.add_ar(EDNS0(udp_len=1232, opts=[ecs_option("81.2.69.0/24"), EDNSOption(10, mine)]))
        wire = q.pack()
        hits = cache.hits
        cached = cache.answer(wire, client, snap, health, random.Random(run), now + run)
        assert cached == resolve(Request(wire, client, snap, health, random.Random(run), now + run))
        assert cache.hits == hits + (run > 0)  # the first of the name fills the cache
        echoed = [o.data for o in DNSRecord.parse(cached).ar[-1].rdata if o.code == 10]
        assert len(echoed) == 1 and echoed[0][:8] == mine
        assert cookies.valid(mine, echoed[0][8:], client.address, now + run)
    assert not cache.memos("udp")  # never replayed by bytes: each reply needs a fresh cookie
