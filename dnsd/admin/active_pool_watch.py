"""Failover and failback events from the active pools (one computation: the status
document's `region_states`, which steers like a query, overrides and a trickle of 1.0
included). After every health, override or config change the active pool of every load
balancer per client region is compared with the one before: regions that left their
first choice (or moved on from a second one) are one `failover` event per load balancer,
regions back on their first choice one `failback` event; a pool's health changing is a
`pool_health` event. Each names the cause and the actor of the change that moved it: changes
by different actors (or for different causes) inside one burst are compared one after the
other, each from the state the one before left, so none carries another's cause.

A nested load balancer (reached from another one as `lb:NAME`, and named by no record)
answers only for the client regions whose path goes through it: its events list only
those regions, not every region it would steer on its own."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Final

from dnsd.admin.status import FAIL_OPEN, all_down_rule, answering_pool
from dnsd.config.lb_graph import LbGraph
from dnsd.config.model import Config
from dnsd.config.pool_refs import nested_lb
from dnsd.events.journal import EventLog
from dnsd.events.record import PROBE, Event, make
from dnsd.health.view import HealthView, change_between

# Per load balancer: (the path that answers each client region, the regions off their
# first choice) — what dnsd.admin.status.region_states returns.
RegionStates = Mapping[str, tuple[Mapping[str, str], Sequence[str]]]
CAUSE_KINDS: Final = frozenset({"backend_health", "override", "config"})
MAX_CAUSES: Final = 4
MAX_STEPS: Final = 8  # changes with their own cause in one burst (more: merged into the last)
SLICE: Final = 50  # load balancers steered between two chances for the event loop to run
SLICE_PAUSE_S: Final = 0.005
COMPARE_SLICE: Final = 100  # load balancers compared (and their events added) in one piece


def merged(first: list[tuple[str, str]], then: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(cause, actor) pairs of both, without repeats, at most MAX_CAUSES."""
    return list(dict.fromkeys([*first, *then]))[:MAX_CAUSES]


def reached_regions(states: RegionStates) -> dict[str, set[str]]:
    """Per nested load balancer, the client regions whose path goes through it."""
    reached: dict[str, set[str]] = {}
    for active, _ in states.values():
        for region, path in active.items():
            for part in path.removesuffix(FAIL_OPEN).split(" -> "):
                if (inner := nested_lb(part)) is not None:
                    reached.setdefault(inner, set()).add(region)
    return reached


def moves(
    before: RegionStates,
    after: RegionStates,
    nested_only: frozenset[str],
    at: float,
    cause: str,
    actor: str,
    config: Config | None = None,
) -> list[Event]:
    """The failover, failback and fail_open events from `before` to `after` (pure).
    `nested_only`: load balancers answering only through another one. With `config`, a
    fail_open event names the `when_all_down` rule answering each region it lists."""
    reached: dict[str, set[str]] = {}
    if nested_only:  # a region whose path reached it before or after counts
        for states in (before, after):
            add_reached(reached, states)
    return moves_of(before, after, nested_only, reached, at, cause, actor, config)


def add_reached(reached: dict[str, set[str]], states: RegionStates) -> None:
    """Adds to `reached` the regions whose path in `states` goes through each nested
    load balancer."""
    for lb, regions in reached_regions(states).items():
        reached.setdefault(lb, set()).update(regions)


def moves_of(
    before: RegionStates,
    after: RegionStates,
    nested_only: frozenset[str],
    reached: Mapping[str, set[str]],
    at: float,
    cause: str,
    actor: str,
    config: Config | None = None,
) -> list[Event]:
    """moves() for the load balancers in `after`, the regions through each nested one
    (`reached`) found beforehand: a part of the load balancers at a time gives the
    events of the whole, in order."""
    events: list[Event] = []
    for lb, (active, failed) in after.items():
        if lb not in before:
            continue
        old_active, old_failed = before[lb]
        scope = reached.get(lb, set()) if lb in nested_only else None
        changed = {
            r: (old_active[r], path)
            for r, path in active.items()
            if r in old_active and old_active[r] != path and (scope is None or r in scope)
        }
        if not changed:
            continue
        # Off the first choice: failed over, or answered with nothing healthy (fail open:
        # even on the first-choice pool that is no failback).
        now_off = set(failed) | {r for r, (_, path) in changed.items() if path.endswith(FAIL_OPEN)}
        was_off = set(old_failed) | {
            r for r, (path, _) in changed.items() if path.endswith(FAIL_OPEN)
        }
        back = sorted(r for r in changed if r not in now_off and r in was_off)
        away = sorted(r for r in changed if r in now_off)
        for kind, moved in (("failover", away), ("failback", back)):
            if moved:
                events.append(_event(kind, lb, moved, changed, at, cause, actor))
        opened = sorted(r for r in away if changed[r][1].endswith(FAIL_OPEN))
        if opened:
            event = _event("fail_open", lb, opened, changed, at, cause, actor)
            owner = config.load_balancers.get(lb) if config is not None else None
            if owner is not None:  # docs/steering.md, when all pools are down: which rule
                rules = {r: all_down_rule(config, owner, changed[r][1]) for r in opened}
                details = {**event.details, "when_all_down": rules}
                event = replace(event, details=MappingProxyType(details))
            events.append(event)
    return events


def _event(
    kind: str,
    lb: str,
    regions: list[str],
    changed: Mapping[str, tuple[str, str]],
    at: float,
    cause: str,
    actor: str,
) -> Event:
    pools = {answering_pool(changed[r][1])[0] for r in regions}
    changes = {r: {"from": changed[r][0], "to": changed[r][1]} for r in regions}
    pool = next(iter(pools)) if len(pools) == 1 else None
    pool = pool or None  # "": no pool answers (when_all_down closed, servfail, all)
    return make(at, kind, cause, actor, lb=lb, pool=pool, regions=tuple(regions), changes=changes)


@dataclass(frozen=True, slots=True)
class Reach:
    """The config compared under and its LB graph (what each load balancer reaches)."""

    config: Config
    graph: LbGraph

    @property
    def nested_only(self) -> frozenset[str]:
        return self.graph.nested_only

    def affected(self, pools: set[str], trickles: set[str]) -> list[str]:
        """The load balancers whose answer may have moved when these pools' health (or
        overrides) and these load balancers' trickle ratios changed, in config order:
        looked up in the graph, not searched (a flapping backend costs the load balancers
        of its pool, not a pass over every one)."""
        return self.graph.reached_lbs(pools, (), trickles)


def reach_of(snap: Any) -> Reach:
    return Reach(snap.config, snap.lb_graph)


def config_diff(old: Config, snap: Any) -> tuple[Reach, set[str], set[str]]:
    """What a reload from `old` to `snap` may move: its Reach, the pools and the load
    balancers it redefined (pure: it runs in a thread for a big config)."""
    config = snap.config
    pools = {p for p, pool in config.pools.items() if old.pools.get(p) != pool}
    redefined = {n for n, lb in config.load_balancers.items() if old.load_balancers.get(n) != lb}
    return reach_of(snap), pools, redefined


class ActivePoolWatch:
    """Compares the active pools after each change with the ones before and adds the
    events to the journal: only the load balancers that reach what changed are steered,
    under the snapshot and health view before the change and under the ones after (a
    pool's health moves the few that use it, not 10,000; nothing is steered at start).
    Armed once the server serves: the first verdicts after a start move nothing (a
    restart is not a failover)."""

    def __init__(
        self,
        states: Callable[[Iterable[str], Any, HealthView], RegionStates],
        snapshot: Callable[[], Any],
        view: Callable[[], HealthView],
        journal: EventLog,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._states = states  # (names, snapshot, view) -> their active pools per region
        self._snapshot = snapshot
        self._view = view
        self._journal = journal
        self._clock = clock
        self._reach: Reach | None = None
        self._seen: tuple[Any, HealthView] | None = None  # the snapshot and view compared to
        self._last_pools: dict[str, bool] = {}
        self._causes: list[tuple[str, str]] = []  # (cause, actor) since the last step
        # Per earlier change of this burst, the snapshot and view it left and its causes.
        self._steps: list[tuple[Any, HealthView, list[tuple[str, str]]]] = []
        # The snapshot and view when the last cause was noted (its change not yet applied).
        self._noted: tuple[Any, HealthView] | None = None
        self.armed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._busy = self._again = False
        # A reload's differences, worked out in a thread: (old config, new config, Reach of
        # the new one, pools redefined, load balancers redefined).
        self._diff: tuple[Config, Config, Reach, set[str], set[str]] | None = None
        journal.listeners.append(self.note)

    def note(self, event: Event) -> None:
        """Remember why things may move next (the check runs right after). A cause is noted
        before its change is applied (an override or verdict before the view is published,
        a reload before the new config's view): when the state moved since the last cause
        was noted, that cause's change is in it, so that state is a step of its own and
        this cause starts the next one."""
        if event.kind not in CAUSE_KINDS:
            return
        why = (event.cause, event.actor)
        snap, view = self._snapshot(), self._view()
        if event.kind == "config" and self._noted is not None:
            snap = self._noted[0]  # already swapped: its change is the next step, not this one
        if (
            self.armed
            and self._causes
            and self._noted is not None
            and (snap is not self._noted[0] or view is not self._noted[1])
            and why not in self._causes
        ):
            if len(self._steps) < MAX_STEPS:
                self._steps.append((snap, view, self._causes))
                self._causes = []
            else:  # a long burst: the last step takes this state and its causes too
                self._steps[-1] = (snap, view, merged(self._steps[-1][2], self._causes))
                self._causes = []
        self._noted = (self._snapshot(), view)
        if len(self._causes) < MAX_CAUSES and why not in self._causes:
            self._causes.append(why)

    def arm(self) -> None:
        """The starting point failovers are measured from: O(pools), no steering."""
        snap, view = self._snapshot(), self._view()
        self._reach, self._seen = reach_of(snap), (snap, view)
        self._last_pools = {n: view.pool_healthy(p) for n, p in snap.config.pools.items()}
        self._causes, self._steps, self._noted, self._diff = [], [], None, None
        self.armed = True

    @property
    def busy(self) -> bool:
        """A check runs in slices (or works out a reload's differences in a thread)."""
        return self._busy

    def check(self) -> None:
        if self._busy:  # a check in slices runs: this one after it
            self._again = True
            return
        if not self.armed or self._reach is None or self._seen is None:
            self._causes, self._steps, self._noted = [], [], None
            return
        steps = [*self._steps, (self._snapshot(), self._view(), self._causes)]
        self._causes, self._steps, self._noted = [], [], None
        self._run(steps)

    def _run(self, steps: list[tuple[Any, HealthView, list[tuple[str, str]]]]) -> None:
        """Each change of the burst from the state the one before it left, in order."""
        for index, (snap, view, causes) in enumerate(steps):
            if self._big_reload(snap) and self._running_loop():
                # A reload of many load balancers: what it changed is worked out in a
                # thread (10,000 of them: ~0.2 s), then this step and the rest run.
                self._busy = True
                task = asyncio.get_running_loop().create_task(self._diff_then(steps[index:]))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                return
            planned = self._plan(snap, view, causes)
            if planned is None:
                continue
            old_snap, old_view, was_there, lbs, why = planned
            if len(lbs) > SLICE and self._running_loop():
                # Many load balancers (a reload, a pool many use): steered a slice at a
                # time, the event loop answering in between; the later steps and a check
                # asked for meanwhile run after.
                self._busy = True
                task = asyncio.get_running_loop().create_task(
                    self._check_in_slices(
                        old_snap, old_view, snap, view, was_there, lbs, why, steps[index + 1 :]
                    )
                )
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                return
            before = self._states(was_there, old_snap, old_view)
            self._compare(before, self._states(lbs, snap, view), *why)

    def _plan(
        self, snap: Any, view: HealthView, causes: list[tuple[str, str]]
    ) -> tuple[Any, HealthView, list[str], list[str], tuple[float, str, str]] | None:
        """From the state compared last to (snap, view): the pool_health events, and the
        load balancers to steer before and after (None: nothing to steer)."""
        assert self._reach is not None and self._seen is not None
        cause = "; ".join(dict.fromkeys(c for c, _ in causes)) or "health change"
        actor = ", ".join(dict.fromkeys(a for _, a in causes)) or PROBE
        old_snap, old_view = self._seen
        config, old = snap.config, old_snap.config
        change = change_between(old_view, view)
        pools = set(change.pools)
        if config is not old:  # a reload: what it changed, and what that reaches
            diff = self._diff
            if diff is None or diff[0] is not old or diff[1] is not config:
                diff = (old, config, *config_diff(old, snap))
            self._diff = None
            self._reach, redefined_pools, redefined = diff[2], diff[3], diff[4]
            pools |= redefined_pools
            trickles = set(change.lbs) | redefined
        else:
            trickles = set(change.lbs)
        lbs = self._reach.affected(pools, trickles)
        self._seen = (snap, view)
        at = self._clock()
        for name in sorted(pools):
            pool = config.pools.get(name)
            if pool is None:
                continue
            healthy, was = view.pool_healthy(pool), self._last_pools.get(name)
            self._last_pools[name] = healthy
            if was is not None and was != healthy:
                self._journal.add(make(at, "pool_health", cause, actor, pool=name, healthy=healthy))
        if not lbs:
            return None
        was_there = [n for n in lbs if n in old.load_balancers]
        return old_snap, old_view, was_there, lbs, (at, cause, actor)

    def _big_reload(self, snap: Any) -> bool:
        """A new config of many load balancers whose differences are not worked out yet."""
        assert self._seen is not None
        old, config = self._seen[0].config, snap.config
        done = self._diff is not None and self._diff[1] is config
        return config is not old and not done and len(config.load_balancers) > SLICE

    async def _diff_then(self, steps: list[tuple[Any, HealthView, list[tuple[str, str]]]]) -> None:
        try:
            assert self._seen is not None
            old, snap = self._seen[0].config, steps[0][0]
            self._diff = (old, snap.config, *await asyncio.to_thread(config_diff, old, snap))
        finally:
            self._busy = False
        self._run(steps)
        if self._again and not self._busy:
            self._again = False
            self.check()

    async def _check_in_slices(
        self,
        old_snap: Any,
        old_view: HealthView,
        snap: Any,
        view: HealthView,
        was_there: list[str],
        lbs: list[str],
        why: tuple[float, str, str],
        rest: list[tuple[Any, HealthView, list[tuple[str, str]]]],
    ) -> None:
        try:
            before = await self._states_in_slices(was_there, old_snap, old_view)
            fresh = await self._states_in_slices(lbs, snap, view)
            await self._compare_in_slices(before, fresh, lbs, *why)
        finally:
            self._busy = False
        if rest:
            self._run(rest)
        if self._again and not self._busy:
            self._again = False
            self.check()

    async def _states_in_slices(
        self, names: list[str], snap: Any, view: HealthView
    ) -> dict[str, Any]:
        states: dict[str, Any] = {}
        for start in range(0, len(names), SLICE):
            states.update(self._states(names[start : start + SLICE], snap, view))
            await asyncio.sleep(SLICE_PAUSE_S)  # the serving thread's turn at the GIL
        return states

    async def _compare_in_slices(
        self,
        before: Mapping[str, Any],
        fresh: Mapping[str, Any],
        lbs: list[str],
        at: float,
        cause: str,
        actor: str,
    ) -> None:
        """_compare, a part at a time: comparing 5,000 load balancers in one piece held
        the event loop for 100-160 ms (the /healthz p99 of a flapping backend), and the
        events of 1,000 that fail over (each logged, counted, journaled) for over 100 ms."""
        assert self._reach is not None
        nested_only, config = self._reach.nested_only, self._reach.config
        reached: dict[str, set[str]] = {}
        if nested_only:  # which regions reach each nested one: from every state first
            for states in (before, fresh):
                names = list(states)
                for start in range(0, len(names), COMPARE_SLICE):
                    add_reached(
                        reached, {n: states[n] for n in names[start : start + COMPARE_SLICE]}
                    )
                    await asyncio.sleep(0)  # cheap: paths only, no events
        for start in range(0, len(lbs), COMPARE_SLICE):
            after = {n: fresh[n] for n in lbs[start : start + COMPARE_SLICE] if n in fresh}
            for event in moves_of(before, after, nested_only, reached, at, cause, actor, config):
                self._journal.add(event)
            await asyncio.sleep(SLICE_PAUSE_S)

    def _compare(
        self,
        before: Mapping[str, Any],
        fresh: Mapping[str, Any],
        at: float,
        cause: str,
        actor: str,
    ) -> None:
        assert self._reach is not None
        reach = self._reach
        for event in moves(before, fresh, reach.nested_only, at, cause, actor, reach.config):
            self._journal.add(event)

    @staticmethod
    def _running_loop() -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True
