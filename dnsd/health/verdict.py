"""From probe states to health (health.md "Quorum", "Overrides"): pure, table-tested.

* `verdict` — a backend's probed state from its sources' states and the monitor's quorum;
* `effective` — whether it serves, with the operator's override applied;
* `next_view` — the next published view, and whether anything but RTTs changed (the
  answer cache keys its plans on that: `states_generation`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Literal

from dnsd.health.fsm import State
from dnsd.health.view import BackendHealth, BackendOverride, HealthView, PoolOverride

Verdict = State  # "unknown" until a source has decided, then "healthy" or "unhealthy"
Initial = Literal["healthy", "unhealthy"]


def verdict(states: Iterable[State], quorum: int | None, initial: Initial) -> Verdict:
    """Unhealthy when at least `quorum` sources say so (default: a majority); a source that
    has not decided counts as down when the monitor starts `initial: unhealthy`."""
    states = list(states)
    if all(s == "unknown" for s in states):
        return "unknown"
    down = sum(1 for s in states if s == "unhealthy" or (s == "unknown" and initial == "unhealthy"))
    return "unhealthy" if down >= (quorum or len(states) // 2 + 1) else "healthy"


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
    a verdict, an override or a trickle ratio changed (RTT-only updates keep it)."""
    same_states = (
        dict(pool_overrides) == dict(last.pool_overrides)
        and dict(trickle_overrides) == dict(last.trickle_overrides)
        and backends.keys() == last.backends.keys()
        and all(
            (b.healthy, b.probed, b.override) == (p.healthy, p.probed, p.override)
            for key, b in backends.items()
            for p in (last.backends[key],)
        )
    )
    return HealthView(
        generation=last.generation + 1,
        states_generation=last.states_generation + (0 if same_states else 1),
        backends=MappingProxyType(dict(backends)),
        pool_overrides=MappingProxyType(dict(pool_overrides)),
        trickle_overrides=MappingProxyType(dict(trickle_overrides)),
    )
