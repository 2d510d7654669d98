"""A load and a steering decision make no reference cycles: it ends with gc.freeze() (dnsd.process_tools.loading),
so cyclic garbage made on the way would never be collected — kept on every reload."""

from __future__ import annotations

import gc
import ipaddress
import random
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from dnslib import QTYPE

from dnsd.config.loader import ParseCache
from dnsd.config.outage import answer_pools
from dnsd.geo.locate import Location
from dnsd.health.store import HealthStore
from dnsd.health.view import HealthView
from dnsd.loading import load_snapshot
from dnsd.steering import ClientInfo, SteeringInputs, steer

ZONES = Path(__file__).resolve().parents[2] / "zones"


def test_loading_the_bundled_zones_leaves_no_cyclic_garbage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gc, "freeze", lambda: None)  # it would hide the garbage from collect
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what collect finds unreachable stays in gc.garbage
    try:
        snapshot = load_snapshot(ZONES, 1, cache=ParseCache())
        gc.collect()
        found = [type(o).__qualname__ for o in gc.garbage]
        functions = [o.__qualname__ for o in gc.garbage if callable(o)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert snapshot.zones
    assert not found, f"cyclic garbage after a load: {functions or found[:10]}"


def test_steering_every_bundled_name_leaves_no_cyclic_garbage() -> None:
    """A plan is built for every first answer of a load-balanced name (and for its class
    while loading): a cycle made there would keep the snapshot it steered from (its answer
    tables, 5 MiB per 100,000 names) until a full collection, or for good when frozen."""
    snapshot = load_snapshot(ZONES, 1, cache=ParseCache())
    client = ClientInfo(ipaddress.ip_address("192.0.2.1"), location=Location(region="WEU"))
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for steering in ("off", "random", "dynamic", "geo", "proximity"):
            for lb in snapshot.config.load_balancers.values():
                for pools in (1, 2):  # two: an answer from several pools (steering.multi)
                    inputs = SteeringInputs(snapshot, HealthView(), client, random.Random(0), 0)
                    steer(inputs, replace(lb, steering=steering, answer_pools=pools), QTYPE.A)
                answer_pools(snapshot.config, lb.name)  # what the status pages list
        gc.collect()
        functions = [o.__qualname__ for o in gc.garbage if callable(o)]
        found = [type(o).__qualname__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert snapshot.config.load_balancers
    assert not found, f"cyclic garbage after steering: {functions or found[:10]}"


def test_the_health_store_keeps_the_config_not_the_snapshot() -> None:
    """The first snapshot is served with its serials as another snapshot (same config):
    a store holding the first would keep its answer tables for the process's life."""
    snapshot = load_snapshot(ZONES, 1, cache=ParseCache())
    store = HealthStore()
    before = sys.getrefcount(snapshot)
    store.set_snapshot(snapshot)
    assert store.config is snapshot.config and store.probe_plan() is not None
    assert sys.getrefcount(snapshot) == before
