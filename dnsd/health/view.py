"""The immutable health view the serving path reads once per query (docs/health.md).

A view maps (pool, backend) to what steering needs: is the backend usable, and its RTT
profile per probe source region. Admin overrides sit beside the probed state (both are
kept, so both can be shown); `healthy` is the effective verdict with overrides applied.
A backend that is absent from the view has no monitor: it counts as healthy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from dnsd.config.model import Backend, Pool

BackendOverride = Literal["down", "up", "drain"]
PoolOverride = Literal["down", "up"]
EMPTY: Mapping[str, object] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class RttSample:
    """EWMA round-trip time of one backend as seen from one probe source region."""

    ewma_ms: float
    samples: int
    last_at: float  # wall-clock seconds of the newest sample


@dataclass(frozen=True, slots=True)
class BackendHealth:
    healthy: bool = True  # the effective verdict: probes, quorum and override applied
    probed: Literal["unknown", "healthy", "unhealthy", "unmonitored"] = "unmonitored"
    override: BackendOverride | None = None
    rtt: Mapping[str, RttSample] = field(default_factory=lambda: MappingProxyType({}))
    # Too few fresh probe sources for a quorum either way: the verdict is held (docs/health.md
    # "Stale sources"), which the status shows as `quorum: degraded`.
    quorum_degraded: bool = False
    # While degraded (docs/health.md "Lost quorum"): since when, and whether the verdict is
    # `held` or was decided by the `fresh` sources once `quorum_hold` ran out.
    quorum_since: float | None = None
    quorum_mode: Literal["ok", "held", "fresh"] = "ok"
    sources_fresh: int = 0  # probe sources whose observation counts (votes)


UNMONITORED = BackendHealth()


@dataclass(frozen=True, slots=True)
class RampStart:
    """docs/steering.md, ramps: a client region's answers moving from a healthy pool to a
    new first choice, since `start_s` (wall clock); dnsd.steering.ramp says the share."""

    start_s: float
    from_ref: str
    to_ref: str


@dataclass(frozen=True, slots=True)
class TrickleRamp:
    """docs/steering.md, ramps: a load balancer's trickle ratio moving from `ratio_from` to
    `ratio_to` (an override, a reload) since `start_s`, in the ramp's steps."""

    start_s: float
    ratio_from: float
    ratio_to: float


LastGoodAnswer = tuple[tuple[str, ...], str | None]  # (addresses, CNAME target)


@dataclass(frozen=True, slots=True)
class HealthChange:
    """What moved between a view and the one before it, as far as answers go (what it
    reaches: dnsd.config.lb_graph, `LbGraph.reached`)."""

    pools: frozenset[str]  # a backend verdict, an override or a pool override changed
    rtt_pools: frozenset[str]  # only RTTs changed
    lbs: frozenset[str]  # a trickle override changed
    # The maps it is the change between, held by identity: it describes only a view whose
    # backends and overrides are these `after` ones, against a view with the `before` ones.
    before: tuple[Mapping[Any, Any], ...] = field(default=(), compare=False, repr=False)
    after: tuple[Mapping[Any, Any], ...] = field(default=(), compare=False, repr=False)

    @property
    def states(self) -> bool:
        """Anything but RTTs moved."""
        return bool(self.pools or self.lbs)


@dataclass(frozen=True, slots=True)
class HealthView:
    generation: int = 0  # bumped on every publication
    # Bumped when anything but RTT changed (verdicts, overrides, trickle): what every plan
    # depends on. RTT-only publications (at most one a second) leave it alone, so caches
    # keep the plans of load balancers that do not steer by RTT.
    states_generation: int = 0
    backends: Mapping[tuple[str, str], BackendHealth] = field(
        default_factory=lambda: MappingProxyType({})
    )
    pool_overrides: Mapping[str, PoolOverride] = field(default_factory=lambda: MappingProxyType({}))
    trickle_overrides: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    # docs/steering.md, when all pools are down (`last_good`): per (load balancer, client
    # region or "", A or AAAA) the answer last given while something was healthy. Read only
    # by a load balancer with nothing healthy, whose entry cannot change meanwhile: no
    # generation of its own (dnsd.serve.last_good records it, off the serving path).
    last_good: Mapping[tuple[str, str, int], LastGoodAnswer] = field(
        default_factory=lambda: MappingProxyType({})
    )

    # docs/steering.md, ramps: per (load balancer, client region or "") the move in progress,
    # set by dnsd.serve.ramps (which bumps both generations: plans depend on it)
    ramps: Mapping[tuple[str, str], RampStart] = field(default_factory=lambda: MappingProxyType({}))
    trickle_ramps: Mapping[str, TrickleRamp] = field(default_factory=lambda: MappingProxyType({}))
    # docs/steering.md, capacity waterfall: per pool with a capacity, the share of the answers
    # offered to it that it takes (the rest spills on), and its answers per second over the
    # last 10 s; set by dnsd.serve.pool_load, which bumps `generation` only (like RTTs)
    pool_admit: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    pool_load: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    # Against the view published before it (dnsd.health.verdict.next_view), made once there;
    # read with `change_between`, which checks it applies.
    change: HealthChange | None = field(default=None, compare=False, repr=False)

    def backend(self, pool: Pool, backend: Backend) -> BackendHealth:
        return self.backends.get((pool.name, backend.name), UNMONITORED)

    def usable(self, pool: Pool, backend: Backend) -> bool:
        """In the configured set at all: enabled in config and not drained by an operator."""
        if not backend.enabled:
            return False
        health = self.backends.get((pool.name, backend.name))
        return health is None or health.override != "drain"

    def is_healthy(self, pool: Pool, backend: Backend) -> bool:
        health = self.backends.get((pool.name, backend.name))
        return health is None or health.healthy

    def pool_healthy(self, pool: Pool) -> bool:
        """docs/health.md: healthy, enabled backends ≥ minimum_origins; overrides win."""
        override = self.pool_overrides.get(pool.name)
        if override is not None:
            return override == "up"
        return self.probed_healthy(pool)

    def probed_healthy(self, pool: Pool) -> bool:
        """Healthy by its probes, a pool override aside: an operator's drain leaves a
        healthy pool (docs/steering.md, ramps)."""
        if not pool.enabled:
            return False
        healthy = sum(1 for b in pool.backends if self.usable(pool, b) and self.is_healthy(pool, b))
        return healthy >= pool.minimum_origins

    def trickle_ratio(self, lb_name: str, configured: float) -> float:
        return self.trickle_overrides.get(lb_name, configured)


def view_of(
    states: Mapping[tuple[str, str], bool | BackendHealth] | None = None,
    *,
    pools: Mapping[str, PoolOverride] | None = None,
    trickle: Mapping[str, float] | None = None,
    generation: int = 1,
    states_generation: int | None = None,
) -> HealthView:
    """Build a view from plain values: {(pool, backend): healthy or BackendHealth}.
    `states_generation` defaults to `generation` (everything changed)."""
    backends = {
        key: value
        if isinstance(value, BackendHealth)
        else BackendHealth(healthy=value, probed="healthy" if value else "unhealthy")
        for key, value in (states or {}).items()
    }
    return HealthView(
        generation=generation,
        states_generation=generation if states_generation is None else states_generation,
        backends=MappingProxyType(backends),
        pool_overrides=MappingProxyType(dict(pools or {})),
        trickle_overrides=MappingProxyType(dict(trickle or {})),
    )


def to_plain(view: HealthView) -> dict[str, Any]:
    """The view as plain values (dicts, tuples, numbers): for the pipe to worker processes."""
    return {
        "generation": view.generation,
        "states_generation": view.states_generation,
        "backends": {
            key: (
                h.healthy,
                h.probed,
                h.override,
                {s: (r.ewma_ms, r.samples, r.last_at) for s, r in h.rtt.items()},
            )
            for key, h in view.backends.items()
        },
        "pool_overrides": dict(view.pool_overrides),
        "trickle_overrides": dict(view.trickle_overrides),
        "last_good": dict(view.last_good),
        "ramps": {key: (r.start_s, r.from_ref, r.to_ref) for key, r in view.ramps.items()},
        "trickle_ramps": {
            lb: (r.start_s, r.ratio_from, r.ratio_to) for lb, r in view.trickle_ramps.items()
        },
        "pool_admit": dict(view.pool_admit),
        "pool_load": dict(view.pool_load),
    }


def from_plain(plain: dict[str, Any]) -> HealthView:
    backends = {
        tuple(key): BackendHealth(
            healthy=healthy,
            probed=probed,
            override=override,
            rtt=MappingProxyType({s: RttSample(*sample) for s, sample in rtt.items()}),
        )
        for key, (healthy, probed, override, rtt) in plain["backends"].items()
    }
    return HealthView(
        generation=plain["generation"],
        states_generation=plain["states_generation"],
        backends=MappingProxyType(backends),
        pool_overrides=MappingProxyType(dict(plain["pool_overrides"])),
        trickle_overrides=MappingProxyType(dict(plain["trickle_overrides"])),
        last_good=MappingProxyType(dict(plain.get("last_good", {}))),
        ramps=MappingProxyType(
            {tuple(key): RampStart(*value) for key, value in plain.get("ramps", {}).items()}
        ),
        trickle_ramps=MappingProxyType(
            {lb: TrickleRamp(*value) for lb, value in plain.get("trickle_ramps", {}).items()}
        ),
        pool_admit=MappingProxyType(dict(plain.get("pool_admit", {}))),
        pool_load=MappingProxyType(dict(plain.get("pool_load", {}))),
    )


def _maps(view: HealthView) -> tuple[Mapping[Any, Any], ...]:
    return (view.backends, view.pool_overrides, view.trickle_overrides)


def health_change(old: HealthView, new: HealthView) -> HealthChange:
    """O(backends + overrides): never O(names)."""
    pools: set[str] = set()
    rtt_pools: set[str] = set()
    if old.backends is not new.backends:
        for key in old.backends.keys() | new.backends.keys():
            before, after = old.backends.get(key), new.backends.get(key)
            if (
                before is None
                or after is None
                or (before.healthy, before.probed, before.override)
                != (after.healthy, after.probed, after.override)
            ):
                pools.add(key[0])
            elif before.rtt is not after.rtt and dict(before.rtt) != dict(after.rtt):
                rtt_pools.add(key[0])
    for name in old.pool_overrides.keys() | new.pool_overrides.keys():
        if old.pool_overrides.get(name) != new.pool_overrides.get(name):
            pools.add(name)
    lbs = {
        name
        for name in old.trickle_overrides.keys() | new.trickle_overrides.keys()
        if old.trickle_overrides.get(name) != new.trickle_overrides.get(name)
    }
    return HealthChange(
        frozenset(pools), frozenset(rtt_pools - pools), frozenset(lbs), _maps(old), _maps(new)
    )


def change_between(old: HealthView, new: HealthView) -> HealthChange:
    """What moved from `old` to `new`: the change `new` was published with when `old` is
    the view before it (the common case, not worked out again), else worked out now."""
    published = new.change
    if published is not None and _same(published.before, old) and _same(published.after, new):
        return published
    return health_change(old, new)


def _same(maps: tuple[Mapping[Any, Any], ...], view: HealthView) -> bool:
    return len(maps) == 3 and all(a is b for a, b in zip(maps, _maps(view), strict=True))
