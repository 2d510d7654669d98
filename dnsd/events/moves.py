"""Failover and failback events from the active pools (one computation: the status
document's `region_states`, which steers like a query, overrides and a trickle of 1.0
included). After every health, override or config change the active pool of every load
balancer per client region is compared with the one before: regions that left their
first choice (or moved on from a second one) are one `failover` event per load balancer,
regions back on their first choice one `failback` event; a pool's health changing is a
`pool_health` event. Each names the cause and the actor of the change that moved it.

A nested load balancer (reached from another one as `lb:NAME`, and named by no record)
answers only for the client regions whose path goes through it: its events list only
those regions, not every region it would steer on its own."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Final

from dnsd.events.journal import EventLog
from dnsd.events.record import PROBE, Event, make

# Per load balancer: (the path that answers each client region, the regions off their
# first choice) — what dnsd.admin.status.region_states returns.
RegionStates = Mapping[str, tuple[Mapping[str, str], list[str]]]
FAIL_OPEN: Final = " (fail open)"  # how region_states marks a path
LB_PREFIX: Final = "lb:"
CAUSE_KINDS: Final = frozenset({"backend_health", "override", "config"})
MAX_CAUSES: Final = 4


def answering_pool(path: str) -> str:
    """`lb:inner -> eu (fail open)` → `eu`."""
    return path.removesuffix(FAIL_OPEN).split(" -> ")[-1]


def reached_regions(states: RegionStates) -> dict[str, set[str]]:
    """Per nested load balancer, the client regions whose path goes through it."""
    reached: dict[str, set[str]] = {}
    for active, _ in states.values():
        for region, path in active.items():
            for part in path.removesuffix(FAIL_OPEN).split(" -> "):
                if part.startswith(LB_PREFIX):
                    reached.setdefault(part[len(LB_PREFIX) :], set()).add(region)
    return reached


def moves(
    before: RegionStates,
    after: RegionStates,
    nested_only: frozenset[str],
    at: float,
    cause: str,
    actor: str,
) -> list[Event]:
    """The failover, failback and fail_open events from `before` to `after` (pure).
    `nested_only`: load balancers answering only through another one."""
    reached: dict[str, set[str]] = {}
    if nested_only:  # a region whose path reached it before or after counts
        for states in (before, after):
            for lb, regions in reached_regions(states).items():
                reached.setdefault(lb, set()).update(regions)
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
        for kind, regions in (("failover", away), ("failback", back)):
            if regions:
                events.append(_event(kind, lb, regions, changed, at, cause, actor))
        opened = sorted(r for r in away if changed[r][1].endswith(FAIL_OPEN))
        if opened:
            events.append(_event("fail_open", lb, opened, changed, at, cause, actor))
    return events


def _event(
    kind: str, lb: str, regions: list[str], changed: Mapping[str, tuple[str, str]],
    at: float, cause: str, actor: str,
) -> Event:  # fmt: skip
    pools = {answering_pool(changed[r][1]) for r in regions}
    changes = {r: {"from": changed[r][0], "to": changed[r][1]} for r in regions}
    pool = next(iter(pools)) if len(pools) == 1 else None
    return make(at, kind, cause, actor, lb=lb, pool=pool, regions=tuple(regions), changes=changes)


class ActivePoolWatch:
    """Compares the active pools after each change with the ones before and adds the
    events to the journal. Armed once the server serves: the first verdicts after a start
    move nothing (a restart is not a failover)."""

    def __init__(
        self,
        states: Callable[[], RegionStates],
        pools: Callable[[], dict[str, bool]],
        nested_only: Callable[[], frozenset[str]],
        journal: EventLog,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._states = states
        self._pools = pools
        self._nested_only = nested_only
        self._journal = journal
        self._clock = clock
        self._last: RegionStates | None = None
        self._last_pools: dict[str, bool] | None = None
        self._causes: list[tuple[str, str]] = []  # (cause, actor) since the last check
        self.armed = False
        journal.listeners.append(self.note)

    def note(self, event: Event) -> None:
        """Remember why things may move next (the check runs right after)."""
        why = (event.cause, event.actor)
        if event.kind in CAUSE_KINDS and len(self._causes) < MAX_CAUSES and why not in self._causes:
            self._causes.append(why)

    def arm(self) -> None:
        self.armed = True
        self._last, self._last_pools = self._states(), self._pools()
        self._causes.clear()

    def check(self) -> None:
        if not self.armed:
            self._causes.clear()
            return
        causes, self._causes = self._causes, []
        cause = "; ".join(dict.fromkeys(c for c, _ in causes)) or "health change"
        actor = ", ".join(dict.fromkeys(a for _, a in causes)) or PROBE
        at = self._clock()
        pools = self._pools()
        last_pools, self._last_pools = self._last_pools, pools
        for pool, healthy in pools.items():
            if last_pools is not None and last_pools.get(pool, healthy) != healthy:
                self._journal.add(make(at, "pool_health", cause, actor, pool=pool, healthy=healthy))
        now = self._states()
        last, self._last = self._last, now
        if last is None:
            return
        for event in moves(last, now, self._nested_only(), at, cause, actor):
            self._journal.add(event)
