"""Inputs every steering step reads, and the ordering a policy returns."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from dnsd.config.model import LoadBalancer, Pool
from dnsd.config.pool_refs import names_lb
from dnsd.health.view import HealthView
from dnsd.snapshot import Snapshot
from dnsd.steering.client import ClientView

Able = Callable[[str], bool]


@dataclass(frozen=True, slots=True)
class SteeringInputs:
    snap: Snapshot
    health: HealthView
    client: ClientView  # a plan reads it through plan_key.SeenClient
    rng: random.Random
    now: float  # wall-clock seconds, for RTT freshness


@dataclass(frozen=True, slots=True)
class Ordering:
    refs: list[str]  # healthy candidates, best first
    reason: str
    location_dependent: bool = False
    weights: list[float] | None = None  # `random`: the order is drawn per query from these
    # The first entry of the LB's list for this client before health is applied (docs/steering.md,
    # trickle): the trickle runs only while it is healthy. None: no primary (`random`).
    primary: str | None = None
    rtt_source: str | None = None  # `dynamic`: the vantage point whose RTTs ranked the pools
    # `dynamic`: the order rests on this health view's RTTs, and holds at most until the
    # first sample it could use ages out (wall clock); None: no RTT read
    rtt_until: float | None = None


def unique(refs: list[str]) -> list[str]:
    """A pool named twice (say default and fallback) takes part once (docs/steering.md, the fallback pool)."""
    return list(dict.fromkeys(refs))


def defaults_then_fallback(lb: LoadBalancer, able: Able) -> list[str]:
    """Healthy default pools in order, then the fallback pool when healthy."""
    refs = list(lb.default_pools) + ([lb.fallback_pool] if lb.fallback_pool else [])
    return [r for r in unique(refs) if able(r)]


def pool_rtt_ms(
    inp: SteeringInputs, lb: LoadBalancer, ref: str, region: str | None
) -> float | None:
    """docs/steering.md, dynamic: mean EWMA of the pool's healthy backends as seen from `region` (a
    probe source: a region code, or `local`), counting only current data (≥ min_samples
    samples, newest within rtt_max_age)."""
    if region is None or names_lb(ref):
        return None
    pool = inp.snap.config.pools.get(ref)
    if pool is None:
        return None
    return _mean_rtt_ms(inp, lb, pool, region, current=True)


def last_pool_rtt_ms(inp: SteeringInputs, lb: LoadBalancer, ref: str, region: str) -> float | None:
    """docs/steering.md, trickle: the pool's last measured RTT from `region`, healthy or not and however
    old (a failed fastest pool keeps its rank as the primary: its failure is a failover)."""
    pool = inp.snap.config.pools.get(ref)
    return None if pool is None else _mean_rtt_ms(inp, lb, pool, region, current=False)


def rtt_ages_out(inp: SteeringInputs, lb: LoadBalancer) -> float:
    """When the first RTT sample current now for `lb`'s pools ages out (docs/steering.md,
    dynamic: older than rtt_max_age stops counting): an order ranked by RTT may change then
    — exactly then, not on a timer."""
    expiry = math.inf
    for ref in lb.pool_refs():
        pool = inp.snap.config.pools.get(ref)
        if pool is None:  # a nested load balancer: its own plan level says
            continue
        for backend in pool.backends:
            for sample in inp.health.backend(pool, backend).rtt.values():
                ages_out = sample.last_at + lb.rtt_max_age_s
                if ages_out >= inp.now:
                    expiry = min(expiry, ages_out)
    return expiry


def _mean_rtt_ms(
    inp: SteeringInputs, lb: LoadBalancer, pool: Pool, region: str, current: bool
) -> float | None:
    """Mean EWMA of the pool's usable backends from `region` with ≥ min_samples samples;
    `current`: of healthy backends with data within rtt_max_age only."""
    values = []
    for backend in pool.backends:
        if not inp.health.usable(pool, backend):
            continue
        if current and not inp.health.is_healthy(pool, backend):
            continue
        sample = inp.health.backend(pool, backend).rtt.get(region)
        if sample is None or sample.samples < lb.min_samples:
            continue
        if current and inp.now - sample.last_at > lb.rtt_max_age_s:
            continue
        values.append(sample.ewma_ms)
    return sum(values) / len(values) if values else None
