"""Health rules: jitter only shortens a probe interval (the outage bound holds),
and the first verdict after a start is not logged as an alarm."""

from __future__ import annotations

import logging
import random
import time

import pytest

from dnsd.health.fsm import ProbeResult
from dnsd.health.probes import target_of
from dnsd.health.scheduler import next_delay
from dnsd.health.store import HealthStore
from dnsd.loading import load_snapshot
from tests.health_harness import write_config


@pytest.mark.parametrize(("interval", "elapsed"), [(0.1, 0.0), (15.0, 0.003), (5.0, 2.0)])
def test_jitter_never_lengthens_an_interval(interval, elapsed) -> None:
    rng = random.Random(14)
    delays = [next_delay(interval, elapsed, 0.1, rng) for _ in range(10_000)]
    assert max(delays) <= interval - elapsed
    assert min(delays) >= interval * 0.9 - elapsed
    assert max(delays) - min(delays) > interval * 0.09  # the jitter is really spread


def test_a_probe_slower_than_its_interval_starts_the_next_at_once() -> None:
    assert next_delay(1.0, 1.5, 0.1, random.Random(1)) == 0.0


def test_first_healthy_verdict_is_info_real_transitions_are_warnings(tmp_path, caplog) -> None:
    config = write_config(
        tmp_path, "type: tcp\nhealthy_threshold: 1\nunhealthy_threshold: 1", [("b", 9)]
    )
    snap = load_snapshot(config, 1)
    store = HealthStore()
    store.set_snapshot(snap)
    pool = snap.config.pools["p"]
    monitor = snap.config.monitors["m"]
    target = target_of(pool.backends[0], monitor)
    caplog.set_level(logging.INFO, logger="dnsd.health")

    def record(ok: bool) -> list[tuple[int, str]]:
        caplog.clear()
        store.record(target, "local", ProbeResult(ok, time.time(), 1.0 if ok else None), monitor)
        return [
            (r.levelno, r.getMessage()) for r in caplog.records if "backend p/b" in r.getMessage()
        ]

    assert record(True) == [(logging.INFO, "backend p/b is healthy (was unknown)")]
    assert record(False) == [(logging.WARNING, "backend p/b is unhealthy (was healthy)")]
    assert record(True) == [(logging.WARNING, "backend p/b is healthy (was unhealthy)")]
