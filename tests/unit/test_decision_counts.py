"""Load-balancer answers are counted once each, whether the answer cache's hot path (its
own tables) or the full path (the metrics' observer) made them (dnsd_lb_answers_total,
dnsd_fallback_answers_total)."""

from __future__ import annotations

import ipaddress
import random

from dnslib import DNSRecord

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
