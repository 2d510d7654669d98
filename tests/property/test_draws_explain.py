"""Explain and serving agree on generated plans (one draw implementation).

Hypothesis generates whole configurations — every steering policy, nesting, fallbacks,
trickle, pool and backend weights (zeros included), max_answers, answer_pools with
distinct, hash selection, zonal
affinity with client zones, host-name backends, both address families — a health state
with RTT samples, and a client. For the same seed, the answer cache (what serves) and
`explain_query` (what `dnsd explain` and the admin API print, through the full path) must
give the same addresses, CNAME, pool, fail-open flag and ECS scope.
"""

from __future__ import annotations

import ipaddress
import random
from dataclasses import replace
from types import MappingProxyType

from dnslib import EDNS0, QTYPE, DNSRecord
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dnsd.config.model import Backend, ClientZone, Config, RRset, Soa, Zone
from dnsd.explain import ecs_option, ecs_scope, explain_query
from dnsd.fastpath import AnswerCache
from dnsd.health.view import BackendHealth, RttSample, view_of
from dnsd.rdata import from_text, record_text
from dnsd.reply import Client
from dnsd.snapshot import NodeSettings, compile_snapshot
from tests.builders import lb, pool
from tests.conftest import GEO
from tests.tiers import examples

EXAMPLES = examples(2000)
NOW = 1_800_000_000.0
REGIONS = ["ENAM", "WEU", "NEAS", None]
CLIENTS = [  # (source, ECS subnet or None): GeoLite2 test data and the client zones
    ("81.2.69.142", None), ("127.0.0.1", "81.2.69.0/24"), ("127.0.0.1", "202.12.27.0/24"),
    ("127.0.0.1", "10.1.3.0/24"), ("10.2.9.9", None), ("127.0.0.1", "2001:4860::/32"),
    ("::1", None), ("127.0.0.1", "12.0.0.0/20"),
]  # fmt: skip
ZONE = Zone(
    name="gen.test.",
    file="generated",
    ttl=300,
    soa=Soa("ns1.gen.test.", "h.gen.test.", 1, 3600, 600, 86400, 30, 300),
    rrsets=(),
    lb_names=MappingProxyType({}),
)
HTTPS_AT_L0 = RRset(
    "l0.gen.test.", QTYPE.HTTPS, 300, (from_text(QTYPE.HTTPS, "1 . alpn=h2", "gen.test."),)
)


@st.composite
def backends(draw: st.DrawFn, pool_name: str) -> list[Backend]:
    out = []
    for i in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["v4", "v4", "v6", "host"]))
        address = {"v4": f"192.0.2.{len(out) + 10}", "v6": f"2001:db8::{len(out) + 10}"}
        out.append(
            Backend(
                name=f"{pool_name}-{i}",
                address=ipaddress.ip_address(address[kind]) if kind != "host" else None,
                hostname=f"{pool_name}{i}.origin.example." if kind == "host" else None,
                port=None,
                zone=draw(st.sampled_from([None, "z-1", "z-2"])),
                role=draw(st.sampled_from(["primary", "primary", "failover"])),
                weight=draw(st.integers(0, 3)),
                enabled=True,
                monitor=None,
            )
        )
    return out


@st.composite
def scenarios(draw: st.DrawFn) -> tuple:
    pools = []
    for p in range(draw(st.integers(1, 4))):
        name = f"p{p}"
        lat = draw(st.sampled_from([None, 40.7, 50.1, 35.7]))
        pools.append(
            pool(
                name,
                draw(backends(name)),
                mode=draw(st.sampled_from(["DISABLED", "STAY_WITHIN_ZONE", "SPILL_CROSS_ZONE"])),
                spill=draw(st.sampled_from([0.0, 0.5, 1.0])),
                failover_ratio=draw(st.sampled_from([None, 0.5])),
                region=draw(st.sampled_from(REGIONS)),
                weight=draw(st.sampled_from([0.0, 1.0, 3.0])),
                lat=lat,
                lon=None if lat is None else 10.0,
            )
        )
        pools[-1] = replace(pools[-1], domain=draw(st.sampled_from([None, "d1", "d2"])))
    names = [p.name for p in pools]
    lbs = []
    count = draw(st.integers(1, 3))
    for i in range(count):
        # Nesting only points down the list: no cycles (rejected at load time anyway).
        refs = names + [f"lb:l{j}" for j in range(i + 1, count)]
        defaults = draw(st.lists(st.sampled_from(refs), min_size=1, max_size=3, unique=True))
        lbs.append(
            lb(
                f"l{i}",
                defaults,
                steering=draw(st.sampled_from(["off", "random", "dynamic", "geo", "proximity"])),
                fallback=draw(st.sampled_from([None, *names])),
                region_pools=draw(
                    st.sampled_from([None, {"WEU": [names[-1]]}, {"NEAS": names[:2]}])
                ),
                trickle=draw(st.sampled_from([0.0, 0.3, 1.0])),
                max_answers=draw(st.integers(1, 3)),
                selection=draw(st.sampled_from(["random", "random", "hash"])),
                min_samples=1,
                client_region=draw(st.sampled_from(["client", "client", "pop"])),
            )
        )
        several = draw(st.sampled_from([1, 1, 2, 3]))  # answer_pools, with or without distinct
        if several > 1:
            distinct = draw(st.sampled_from([None, "region", "zone", "domain"]))
            lbs[-1] = replace(lbs[-1], answer_pools=several, distinct=distinct)
    states = {}
    for p in pools:
        for b in p.backends:
            rtt = {
                region: RttSample(ewma_ms=draw(st.floats(1, 300)), samples=3, last_at=NOW - 1)
                for region in ("ENAM", "WEU", "local")
                if draw(st.booleans())
            }
            healthy = draw(st.booleans())
            states[(p.name, b.name)] = BackendHealth(
                healthy=healthy,
                probed="healthy" if healthy else "unhealthy",
                rtt=MappingProxyType(rtt),
            )
    trickle = draw(st.sampled_from([None, {"l0": 0.5}]))
    client = draw(st.sampled_from(CLIENTS))
    qtype = draw(st.sampled_from(["A", "A", "AAAA", "ANY", "HTTPS"]))
    node = NodeSettings(name="pop1", pop_region=draw(st.sampled_from(["WEU", None])))
    return pools, lbs, states, trickle, client, qtype, node


def served(cache: AnswerCache, snap, health, source: str, ecs: str | None, qtype: str, seed: int):
    """The answer cache's reply, read as a resolver would, and what it told the metrics
    (through the observer, or the counters its answer table named)."""
    query = DNSRecord.question("l0.gen.test", qtype)
    if ecs:
        query.add_ar(EDNS0(udp_len=1232, opts=[ecs_option(ecs)]))
    told = []
    lb_before, fallback_before = dict(cache.lb_counts), dict(cache.fallback_counts)
    wire = cache.answer(
        query.pack(),
        Client(ipaddress.ip_address(source), "udp"),
        snap,
        health,
        random.Random(seed),
        NOW,
        lambda _lb, pool, _region, fail_open: told.append((pool, fail_open)),
    )
    assert wire is not None
    reply = DNSRecord.parse(wire)
    answer = [str(rr.rdata) for rr in reply.rr if rr.rtype in (QTYPE.A, QTYPE.AAAA, QTYPE.CNAME)]
    answer += [record_text(rr) for rr in reply.rr if rr.rtype == QTYPE.HTTPS]  # its hints
    if not told:  # answered from the answer table: its counters say what was decided
        lb = {k: n - lb_before.get(k, 0) for k, n in cache.lb_counts.items()}
        fallback = {k: n - fallback_before.get(k, 0) for k, n in cache.fallback_counts.items()}
        counted = [key for key, n in lb.items() if n]
        assert len(counted) == 1 and lb[counted[0]] == 1, lb
        pool = counted[0][1]
        told.append((None if pool == "-" else pool, fallback.get("l0", 0) == 1))
    assert len(told) == 1
    return answer, told[0][0], told[0][1], ecs_scope(reply)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios(), st.lists(st.integers(0, 2**32), min_size=1, max_size=3))
def test_explain_and_serving_agree_on_generated_plans(scenario, seeds) -> None:
    pools, lbs, states, trickle, (source, ecs), qtype, node = scenario
    zone = replace(
        ZONE,
        lb_names=MappingProxyType({f"{b.name}.gen.test.": b.name for b in lbs}),
        rrsets=(HTTPS_AT_L0,),  # HTTPS hints = the steered addresses (docs/steering.md)
    )
    config = Config(
        zones=(zone,),
        monitors=MappingProxyType({}),
        pools=MappingProxyType({p.name: p for p in pools}),
        load_balancers=MappingProxyType({b.name: b for b in lbs}),
        client_zones=(
            ClientZone(ipaddress.ip_network("10.1.0.0/16"), "z-1"),
            ClientZone(ipaddress.ip_network("10.2.0.0/16"), "z-2"),
        ),
    )
    snap = compile_snapshot(config, 1, geo=GEO, node=node)
    health = view_of(states, trickle=trickle)
    cache = AnswerCache()
    for seed in [*seeds, *seeds]:  # the second round answers from compiled, cached draws
        answer, pool_, fail_open, scope = served(cache, snap, health, source, ecs, qtype, seed)
        explained = explain_query(
            snap, health, "l0.gen.test", qtype, source, ecs, random.Random(seed), NOW
        )
        https = [r for r in explained["records"] if " IN HTTPS " in r]
        assert (answer, pool_, fail_open, scope) == (
            explained["answer"] + https,
            explained["pool"],
            explained["fail_open"],
            explained["ecs_scope"],
        ), explained["trail"]
