"""From probe states to health (docs/health.md, quorum, "Overrides"): pure, table-tested.

* `verdict` — a backend's probed state from its sources' states and the monitor's quorum;
* `quorum_verdict` — the same with a lost quorum bounded in time (`quorum_hold`);
* `effective` — whether it serves, with the operator's override applied;
* `next_view` — the next published view, and whether anything but RTTs changed (the
  answer cache keys its plans on that: `states_generation`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from dnsd.health.fsm import State
from dnsd.health.view import (
    BackendHealth,
    BackendOverride,
    HealthView,
    PoolOverride,
    health_change,
)

Verdict = State  # "unknown" until a source has decided, then "healthy" or "unhealthy"
Initial = Literal["healthy", "unhealthy"]
# How a verdict was reached: `ok` a quorum of fresh sources decided; `held` too few fresh
# sources agree and the last verdict is kept; `fresh` the hold is over and the fresh sources
# decided by their own majority (docs/health.md "Lost quorum").
QuorumMode = Literal["ok", "held", "fresh"]


@dataclass(frozen=True, slots=True)
class QuorumVerdict:
    verdict: Verdict
    mode: QuorumMode
    since: float | None  # when the quorum was lost; None while a quorum decides


def verdict(
    states: Iterable[State | None],
    quorum: int | None,
    initial: Initial,
    last: Verdict | None = None,
) -> Verdict:
    """The backend's probed state from its sources' states (docs/health.md, source regions and
    quorum, "Stale sources"); `last` is held when the fresh sources decide nothing."""
    decided = decide(list(states), quorum, initial)
    if decided is not None:
        return decided
    return last if last is not None else "unknown"


def decide(states: list[State | None], quorum: int | None, initial: Initial) -> Verdict | None:
    """What the fresh sources decide, or None when they decide nothing.

    `None` is a stale source (its node died or was cut off): it does not vote. A source
    that has not decided yet counts as down only when the monitor starts `initial:
    unhealthy`. Unhealthy when at least `quorum` fresh sources say so (default: a majority
    of all sources); healthy when so many fresh sources say healthy that no quorum could say
    otherwise (for the default majority: a quorum of them). With every source fresh one of
    the two always holds; with stale sources between them nothing is decided, so losing a
    checker neither readmits a failing backend nor fails a healthy one.
    """
    fresh = [s for s in states if s is not None]
    if all(s == "unknown" for s in states):
        return "unknown"  # nothing decided yet, ever
    if all(s == "unknown" for s in fresh):
        return None
    needed = quorum or len(states) // 2 + 1
    down = sum(1 for s in fresh if s == "unhealthy" or (s == "unknown" and initial == "unhealthy"))
    if down >= needed:
        return "unhealthy"
    if len(fresh) - down >= len(states) - needed + 1:
        return "healthy"
    return None


def fresh_majority(states: Iterable[State | None], initial: Initial) -> Verdict | None:
    """What the fresh sources say by their own majority (one fresh source decides alone), or
    None on a tie or when no fresh source has decided. A source that has not decided yet
    counts only as the monitor's `initial: unhealthy`, as in `decide`."""
    down = up = 0
    for s in states:
        if s == "unhealthy" or (s == "unknown" and initial == "unhealthy"):
            down += 1
        elif s == "healthy":
            up += 1
    if down > up:
        return "unhealthy"
    if up > down:
        return "healthy"
    return None


def quorum_verdict(
    states: Iterable[State | None],
    quorum: int | None,
    initial: Initial,
    last: Verdict | None,
    lost_since: float | None,
    now: float,
    hold_s: float | None,
) -> QuorumVerdict:
    """The backend's probed state with a lost quorum bounded in time (docs/health.md "Lost
    quorum"). `lost_since` is when the quorum was lost (the previous result's `since`, None
    if it was not lost); `hold_s` None holds forever (the third-wave rule).

    Holding the last verdict covers a short loss of checkers (a node restarting, a blip of
    the bus): flapping a backend on one source's word then would be worse than waiting. A
    regional outage is not short: after `hold_s` the sources that still probe decide, else a
    failed backend would be answered for as long as the other nodes stay lost.
    """
    votes = list(states)
    decided = decide(votes, quorum, initial)
    if decided is not None:
        return QuorumVerdict(decided, "ok", None)
    since = now if lost_since is None else lost_since
    held = last if last is not None else "unknown"
    if hold_s is None or now - since < hold_s:
        return QuorumVerdict(held, "held", since)
    fresh = fresh_majority((v for v in votes if v is not None), initial)
    if fresh is None:  # a tie (or nothing decided) among the fresh: still held
        return QuorumVerdict(held, "held", since)
    return QuorumVerdict(fresh, "fresh", since)


def quorum_degraded(states: Iterable[State | None], quorum: int | None, initial: Initial) -> bool:
    """The verdict is held, not decided: too few fresh sources agree (status `quorum:
    degraded`)."""
    return decide(list(states), quorum, initial) is None


def effective(probed: Verdict, override: BackendOverride | None, initial: Initial) -> bool:
    """Serving or not: an override `down`/`up` wins; `drain` keeps the probed verdict (the
    backend only leaves the eligible sets); unknown counts as healthy unless `initial`."""
    if override == "down":
        return False
    if override == "up":
        return True
    if probed == "unknown":
        return initial != "unhealthy"
    return probed == "healthy"


def news_level(previous: Verdict | None, probed: Verdict) -> int | None:
    """How loudly a verdict change is logged: None when it is no change (or not yet a
    verdict); the first verdict after a start is news only when it is bad."""
    if previous is None or previous == probed or probed == "unknown":
        return None
    return logging.INFO if previous == "unknown" and probed == "healthy" else logging.WARNING


def next_view(
    last: HealthView,
    backends: Mapping[tuple[str, str], BackendHealth],
    pool_overrides: Mapping[str, PoolOverride],
    trickle_overrides: Mapping[str, float],
) -> HealthView:
    """The view after `last`: a new generation always; a new states generation only when
    a verdict, an override or a trickle ratio changed (RTT-only updates keep it). The
    change against `last` is worked out here, once, and published with the view."""
    view = HealthView(
        backends=MappingProxyType(dict(backends)),
        pool_overrides=MappingProxyType(dict(pool_overrides)),
        trickle_overrides=MappingProxyType(dict(trickle_overrides)),
    )
    change = health_change(last, view)
    return HealthView(
        generation=last.generation + 1,
        states_generation=last.states_generation + (1 if change.states else 0),
        backends=view.backends,
        pool_overrides=view.pool_overrides,
        trickle_overrides=view.trickle_overrides,
        last_good=last.last_good,  # kept: dnsd.serve.last_good adds to it
        ramps=last.ramps,  # kept: dnsd.serve.ramps sets them
        trickle_ramps=last.trickle_ramps,
        pool_admit=last.pool_admit,  # kept: dnsd.serve.pool_load sets them
        pool_load=last.pool_load,
        change=change,
    )
