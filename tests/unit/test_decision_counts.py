"""Load-balancer answers are counted once each, whether the answer cache's hot path (its
own tables) or the full path (the metrics' observer) made them (dnsd_lb_answers_total,
dnsd_fallback_answers_total)."""

from __future__ import annotations

import ipaddress
import random

from dnslib import DNSRecord

from dnsd import answer_table
from dnsd.admin.metrics import Metrics
from dnsd.config.loader import load_config
from dnsd.fastpath import AnswerCache
from dnsd.health.view import view_of
from dnsd.reply import Client
from dnsd.snapshot import compile_snapshot
from tests.conftest import DATA, GEO


def test_every_answer_counted_once_on_either_path() -> None:
    config, _ = load_config(DATA / "fast")
    snap = compile_snapshot(config, 1, geo=GEO)
    metrics = Metrics()
    cache = AnswerCache()
    metrics.count_decisions_of(cache.lb_counts, cache.fallback_counts)
    metrics.count_decisions_of(cache.lb_counts, cache.fallback_counts)  # TCP and UDP share it
    client = Client(ipaddress.ip_address("127.0.0.1"), "udp")
    rng = random.Random(5)
    healthy = view_of({}, generation=1)
    wire = bytes(DNSRecord.question("geo.fast.test").pack())
    for _ in range(30):
        cache.answer(wire, client, snap, healthy, rng, 0.0, metrics.observe_decision)
    assert sum(cache.lb_counts.values()) > 0  # most of them on the hot path
    lb, fallback = metrics.decision_totals()
    assert lb == {("geo", "a", "-"): 30} and fallback == {}
    # Pool a down: the (healthy) fallback pool answers as a candidate.
    a_down = {("a", b): False for b in ("a1", "a2", "a6")}
    for _ in range(20):
        cache.answer(wire, client, snap, view_of(a_down, generation=2), rng, 0.0,
                     metrics.observe_decision)  # fmt: skip
    # Nothing healthy: the fallback pool answers regardless, each answer a fallback answer.
    none_up = view_of({**a_down, ("sorry", "s1"): False}, generation=3)
    for _ in range(10):
        cache.answer(wire, client, snap, none_up, rng, 0.0, metrics.observe_decision)
    lb, fallback = metrics.decision_totals()
    assert lb == {("geo", "a", "-"): 30, ("geo", "sorry", "-"): 30}
    assert fallback == {"geo": 10}


def test_counts_survive_the_counter_index_starting_again(monkeypatch) -> None:
    """Past MAX_COUNTERS the tables go and the index starts again: what was counted stays
    counted — decisions in the cache's folded totals, replies (the compiled loop's) in the
    tally — never twice, never lost."""
    config, _ = load_config(DATA / "fast")
    snap = compile_snapshot(config, 1, geo=GEO)
    metrics = Metrics()
    cache = AnswerCache()
    tally = metrics.tally("udp")
    cache.count_replies_into(tally)
    client = Client(ipaddress.ip_address("127.0.0.1"), "udp")
    rng, healthy = random.Random(5), view_of({}, generation=1)
    wire = bytes(DNSRecord.question("geo.fast.test").pack())
    for _ in range(10):
        cache.answer(wire, client, snap, healthy, rng, 0.0, metrics.observe_decision)
    table = cache.tables("udp")[wire[2:]]
    reply_counter = answer_table.leaf_at(table, answer_table.walk(table, b"\x7f\0\0\1", rng)[1])[1]
    cache.counters[reply_counter] += 3  # as the compiled loop counts its answers
    lb_before, queries_before = dict(cache.lb_counts), tally.totals()
    assert sum(queries_before.values()) == 3 and sum(lb_before.values()) > 0
    monkeypatch.setattr("dnsd.fastpath.counters.MAX_COUNTERS", 1)
    # another load-balanced name (an ordinary one is answered from the zone tables: no counter)
    cache.answer(bytes(DNSRecord.question("rnd.fast.test").pack()), client, snap, healthy,
                 rng, 0.0, metrics.observe_decision)  # fmt: skip
    assert len(cache.counters) <= 3 and not cache.tables("udp").get(wire[2:])
    assert dict(cache.lb_counts) == lb_before and tally.totals() == queries_before
