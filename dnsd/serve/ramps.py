"""Ramps (docs/steering.md, ramps): when a ramp starts, kept in the health view.

After each health view whose states changed, and after a reload (a new config publishes a
view), every load balancer with `ramp:` is planned once per client region — a client
placed in each region, as the status document places them — and the first choice of each
(`select.first_choice`) is compared with the one before. A region whose first choice moved
away from a pool that is still healthy by its probes (a failback after recovery, a pool
drained by an override, a trickle of 1.0, a new order after a reload) starts a ramp there:
`RampStart(now, from, to)` in the view's `ramps`, and a `ramp` event. A move away from an
unhealthy pool starts none, and ends a ramp in progress there; a ramp whose pool left turns
unhealthy, or whose region moves again, is dropped. Setting ramps publishes a view with
both generations bumped, so every cached plan is built again with them; what share is in
force at a time is `dnsd.steering.ramp`, a pure function of the start and the clock.

Ramps in progress are kept in STATE_DIR/ramps.json (`ramp_file`) and read back at start,
so a restart in the middle of a ramp goes on with it.
"""

from __future__ import annotations

import ipaddress
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from prometheus_client.core import GaugeMetricFamily

from dnsd.events.journal import EventLog
from dnsd.events.record import current_actor, current_cause, make
from dnsd.geo.locate import Location
from dnsd.geo.regions import REGIONS
from dnsd.health.store import HealthStore
from dnsd.health.view import HealthView, RampStart, TrickleRamp
from dnsd.serve import ramp_file
from dnsd.snapshot import Snapshot, SnapshotHolder
from dnsd.steering import ClientInfo, SteeringInputs
from dnsd.steering.ramp import in_force, trickle_at
from dnsd.steering.records import A
from dnsd.steering.select import able_checker, build_plan, first_choice, left_healthy

PLACEHOLDER = ipaddress.ip_address("192.0.2.1")  # the location is set directly
NO_RAMPS: Mapping[tuple[str, str], RampStart] = MappingProxyType({})
Key = tuple[str, str]


def first_choices(
    snap: Snapshot, view: HealthView, now: float, dynamic_only: bool = False
) -> dict[Key, str | None]:
    """Per (load balancer with a ramp, client region or ""): its first choice under `view`
    with no ramp in force (where the answers are heading); of `dynamic` ones only, with
    `dynamic_only`."""
    bare = replace(view, ramps=NO_RAMPS)
    out: dict[Key, str | None] = {}
    for lb in snap.config.load_balancers.values():
        if lb.ramp is None or (dynamic_only and lb.steering != "dynamic"):
            continue
        for region in (*REGIONS, None):
            location = Location(region=region, source="pop_region")
            client = ClientInfo(PLACEHOLDER, location=location, pop=snap.node.name)
            inputs = SteeringInputs(snap, bare, client, random.Random(0), now)
            out[(lb.name, region or "")] = first_choice(build_plan(inputs, lb, A))
    return out


def next_ramps(
    snap: Snapshot,
    view: HealthView,
    before: Mapping[Key, str | None],
    after: Mapping[Key, str | None],
    now: float,
) -> tuple[dict[Key, RampStart], list[Key]]:
    """The ramps after a change (pure): those still in force, and one from each region's old
    first choice to its new one where the old one is still healthy; and the keys started."""
    lbs = snap.config.load_balancers
    inputs = SteeringInputs(snap, view, ClientInfo(PLACEHOLDER), random.Random(0), now)
    able = able_checker(inputs, 0)

    def healthy(ref: str) -> bool:
        return left_healthy(inputs, ref, able)

    ramps: dict[Key, RampStart] = {}
    for key, start in view.ramps.items():
        lb = lbs.get(key[0])
        if lb is None or lb.ramp is None or now >= start.start_s + lb.ramp.duration_s:
            continue  # over (or no longer configured)
        if after.get(key) == start.to_ref and healthy(start.from_ref):
            ramps[key] = start
    started = []
    for key, to in after.items():
        old = before.get(key)
        if old is None or to is None or old == to:
            continue
        ramps.pop(key, None)  # moving again: a ramp in progress here ends
        if old in lbs[key[0]].pool_refs() and healthy(old):
            ramps[key] = RampStart(now, old, to)
            started.append(key)
    return ramps, started


def next_trickle_ramps(
    snap: Snapshot,
    view: HealthView,
    before: Mapping[str, float],
    after: Mapping[str, float],
    now: float,
) -> tuple[dict[str, TrickleRamp], list[str]]:
    """The trickle ratio's ramps after a change (pure): those still moving to the ratio in
    force, and one per load balancer whose ratio changed below 1.0, from the ratio in force
    until now (a ratio of 1.0 moves the first choice: a ramp of its own); and those started."""
    lbs = snap.config.load_balancers
    out: dict[str, TrickleRamp] = {}
    for name, moving in view.trickle_ramps.items():
        lb = lbs.get(name)
        if lb is None or lb.ramp is None or now >= moving.start_s + lb.ramp.duration_s:
            continue  # over (or no longer configured)
        if after.get(name) == moving.ratio_to:
            out[name] = moving
    started = []
    for name, ratio in after.items():
        old = before.get(name)
        if old is None or old == ratio:
            continue
        out.pop(name, None)
        was, _, _ = trickle_at(lbs[name], view.trickle_ramps.get(name), old, now)
        if was < 1.0 and ratio < 1.0:
            out[name] = TrickleRamp(now, was, ratio)
            started.append(name)
    return out, started


class RampWatch:
    """The main process's view step that starts and ends ramps; also the collector of
    `dnsd_lb_ramp_share{lb,region,pool}`."""

    def __init__(
        self,
        holder: SnapshotHolder,
        store: HealthStore,
        events: EventLog,
        clock: Callable[[], float] = time.time,
        state_dir: Path | None = None,
    ) -> None:
        self.holder, self.store, self.events, self.clock = holder, store, events, clock
        self._seen: tuple[int, int] | None = None  # (config id, states generation) looked at
        self._firsts: dict[Key, str | None] = {}
        self._trickles: dict[str, float] = {}  # the trickle ratio of each LB with a ramp
        self.writer = ramp_file.Writer(state_dir / ramp_file.FILE) if state_dir else None

    def load(self) -> int:
        """The ramps in progress before a restart into the store's view (before anything
        answers); how many. The first view keeps those still in force."""
        if self.writer is None:
            return 0
        ramps, trickles = ramp_file.read(self.writer.path)
        if ramps or trickles:
            self.store.view = replace(
                self.store.view,
                ramps=MappingProxyType(ramps),
                trickle_ramps=MappingProxyType(trickles),
            )
        return len(ramps) + len(trickles)

    def on_view(self, view: HealthView) -> None:
        snap = self.holder.current
        seen = (id(snap.config), view.states_generation)
        if seen == self._seen:
            # RTT only: a `dynamic` order that moves with RTTs starts no ramp, but the next
            # change must compare with where answers head now, not before the RTTs moved
            if self._firsts:
                self._firsts.update(first_choices(snap, view, self.clock(), dynamic_only=True))
            return
        self._seen = seen
        if (
            not self._firsts
            and not view.ramps
            and not view.trickle_ramps
            and not any(lb.ramp is not None for lb in snap.config.load_balancers.values())
        ):
            return  # the common case: nobody ramps
        now = self.clock()
        firsts = first_choices(snap, view, now)
        ramps, started = next_ramps(snap, view, self._firsts, firsts, now)
        trickles = {
            lb.name: view.trickle_ratio(lb.name, lb.trickle_ratio)
            for lb in snap.config.load_balancers.values()
            if lb.ramp is not None
        }
        moving, moved = next_trickle_ramps(snap, view, self._trickles, trickles, now)
        self._firsts, self._trickles = firsts, trickles
        if ramps == dict(view.ramps) and moving == dict(view.trickle_ramps):
            return
        current = self.store.view  # the view just published (or a newer one)
        self.store.view = replace(
            current,
            ramps=MappingProxyType(ramps),
            trickle_ramps=MappingProxyType(moving),
            generation=current.generation + 1,
            states_generation=current.states_generation + 1,
        )
        self._seen = (id(snap.config), self.store.view.states_generation)
        if self.writer is not None:
            self.writer.later(ramp_file.to_json(ramps, moving))
        self._tell(snap, ramps, started, now)
        for name in moved:
            lb_ramp = snap.config.load_balancers[name].ramp
            assert lb_ramp is not None  # started only for load balancers with one
            self.events.add(
                make(
                    now,
                    "ramp",
                    current_cause("override"),
                    current_actor(),
                    lb=name,
                    trickle_from=moving[name].ratio_from,
                    trickle_to=moving[name].ratio_to,
                    steps=lb_ramp.steps,
                    duration_s=lb_ramp.duration_s,
                )
            )

    def _tell(
        self, snap: Snapshot, ramps: Mapping[Key, RampStart], started: list[Key], now: float
    ) -> None:
        """One `ramp` event per load balancer and move, listing its regions."""
        moves: dict[tuple[str, str, str], list[str]] = {}
        for key in started:
            start = ramps[key]
            moves.setdefault((key[0], start.from_ref, start.to_ref), []).append(key[1] or "unknown")
        for (name, old, new), regions in moves.items():
            ramp = snap.config.load_balancers[name].ramp
            assert ramp is not None  # started only for load balancers with one
            self.events.add(
                make(
                    now,
                    "ramp",
                    current_cause("health"),
                    current_actor(),
                    lb=name,
                    pool=new,
                    regions=tuple(regions),
                    from_pool=old,
                    to_pool=new,
                    steps=ramp.steps,
                    duration_s=ramp.duration_s,
                    schedule=[
                        [round(now + (k - 1) * ramp.duration_s / ramp.steps, 3), k / ramp.steps]
                        for k in range(1, ramp.steps + 1)
                    ],
                )
            )

    def collect(self) -> Iterator[GaugeMetricFamily]:
        share = GaugeMetricFamily(
            "dnsd_lb_ramp_share",
            "Share of a client region's answers each pool of a ramp in force gets "
            "(the pool moved to, and the pool left)",
            labels=["lb", "region", "pool"],
        )
        snap, view, now = self.holder.current, self.store.view, self.clock()
        if view.ramps:
            for lb in snap.config.load_balancers.values():
                for ramp in in_force(lb, view.ramps, now):
                    region = ramp["region"] or "unknown"
                    share.add_metric([lb.name, region, ramp["to"]], ramp["share"])
                    share.add_metric([lb.name, region, ramp["from"]], 1.0 - ramp["share"])
        yield share
