"""The outage budget (docs/steering.md, the outage budget): the longest a client behind a
cache can still be sent to a dead backend of a load-balanced name,

    TTL + interval × unhealthy_threshold + timeout

— the probes need `unhealthy_threshold` failures in a row, one `interval` apart, the last of
them taking up to `timeout` (retries included: the timeout bounds the whole probe, so retries
never add to it, docs/health.md), and a cache may hold the last good answer one more TTL.

One formula for every user: `dnsd check`, `max_outage`, `explain` and the drills' bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dnsd.config.model import LB_PREFIX, Config, Monitor


def detect_s(interval_s: float, threshold: int, timeout_s: float) -> float:
    """How long the probes take to call a change: `threshold` probes in a row one interval
    apart, the last one lasting up to its timeout (unhealthy_threshold: a failure;
    healthy_threshold: a recovery)."""
    return interval_s * threshold + timeout_s


def worst_case_s(
    ttl_s: float, interval_s: float, unhealthy_threshold: int, timeout_s: float
) -> float:
    """TTL + interval × unhealthy_threshold + timeout."""
    return ttl_s + detect_s(interval_s, unhealthy_threshold, timeout_s)


@dataclass(frozen=True, slots=True)
class OutageBudget:
    """One load balancer's worst case: the slowest monitor of every pool it can answer from
    (nested load balancers included), with the LB's own TTL (the one clients cache)."""

    lb: str
    ttl_s: float
    seconds: float | None  # None: no pool it answers from is probed
    pool: str | None = None  # the pool whose monitor is the slowest to notice
    monitor: str | None = None
    interval_s: float = 0.0
    unhealthy_threshold: int = 0
    timeout_s: float = 0.0
    unprobed: tuple[str, ...] = ()  # pools without any monitor: their outages go unnoticed
    max_outage_s: float | None = None

    @property
    def formula(self) -> str:
        if self.seconds is None:
            return "no probes: an outage is never detected"
        return (
            f"TTL {self.ttl_s:g}s + {self.interval_s:g}s × {self.unhealthy_threshold} "
            f"+ timeout {self.timeout_s:g}s (monitor {self.monitor}, pool {self.pool})"
        )

    @property
    def exceeded(self) -> bool:
        """`max_outage` is set and the worst case is above it (or unbounded)."""
        if self.max_outage_s is None:
            return False
        return self.seconds is None or self.seconds > self.max_outage_s

    def text(self) -> str:
        return budget_text(self.to_json())

    def to_json(self) -> dict[str, Any]:
        return {
            "lb": self.lb,
            "seconds": self.seconds,
            "formula": self.formula,
            "ttl_s": self.ttl_s,
            "pool": self.pool,
            "monitor": self.monitor,
            "interval_s": self.interval_s if self.seconds is not None else None,
            "unhealthy_threshold": self.unhealthy_threshold if self.seconds is not None else None,
            "timeout_s": self.timeout_s if self.seconds is not None else None,
            "unprobed": list(self.unprobed),
            "max_outage_s": self.max_outage_s,
            "exceeded": self.exceeded,
        }


def budget_text(budget: dict[str, Any]) -> str:
    """One line from `OutageBudget.to_json()` (also as an admin API's explain returned it)."""
    if budget["seconds"] is None:
        text = str(budget["formula"])
    else:
        text = f"{budget['seconds']:g}s = {budget['formula']}"
        if budget["unprobed"]:
            text += (
                f"; not probed (an outage there is never detected): {', '.join(budget['unprobed'])}"
            )
    if budget["max_outage_s"] is not None:
        over = " EXCEEDED" if budget["exceeded"] else ""
        text += f"; max_outage {budget['max_outage_s']:g}s{over}"
    return text


def answer_pools(config: Config, lb_name: str) -> tuple[str, ...]:
    """Every pool the load balancer can answer from: its own (mapped and fallback included)
    and, through `lb:NAME`, those of nested load balancers; in configuration order."""
    out: dict[str, None] = {}
    _visit(config, lb_name, set(), out)
    return tuple(out)


def _visit(config: Config, name: str, seen: set[str], out: dict[str, None]) -> None:
    """answer_pools' walk (a function of its own: a closure calling itself is a cycle)."""
    lb = config.load_balancers.get(name)
    if lb is None or name in seen:  # a cycle is an error reported elsewhere
        return
    seen.add(name)
    for ref in lb.pool_refs():
        if ref.startswith(LB_PREFIX):
            _visit(config, ref[len(LB_PREFIX) :], seen, out)
        elif ref in config.pools:
            out[ref] = None


def pool_monitors(config: Config, pool_name: str) -> list[Monitor]:
    """The monitors that probe the pool's backends (a backend's own overrides the pool's);
    empty: nothing probes the pool."""
    pool = config.pools[pool_name]
    names = [backend.monitor or pool.monitor for backend in pool.backends] or [pool.monitor]
    found = {n: config.monitors[n] for n in names if n and n in config.monitors}
    return list(found.values())


def outage_budget(config: Config, lb_name: str) -> OutageBudget:
    """The worst case over every pool the LB can answer from (the max, since any of them may
    be the one answering when it fails); pools nobody probes are listed apart."""
    lb = config.load_balancers[lb_name]
    best: tuple[float, str, Monitor] | None = None
    unprobed: list[str] = []
    for pool in answer_pools(config, lb_name):
        monitors = pool_monitors(config, pool)
        if not monitors:
            unprobed.append(pool)
        for m in monitors:
            s = worst_case_s(lb.ttl, m.interval_s, m.unhealthy_threshold, m.timeout_s)
            if best is None or s > best[0]:
                best = (s, pool, m)
    if best is None:
        return OutageBudget(
            lb.name, lb.ttl, None, unprobed=tuple(unprobed), max_outage_s=lb.max_outage_s
        )
    seconds, pool, m = best
    return OutageBudget(
        lb.name,
        lb.ttl,
        round(seconds, 3),
        pool,
        m.name,
        m.interval_s,
        m.unhealthy_threshold,
        m.timeout_s,
        tuple(unprobed),
        lb.max_outage_s,
    )


def name_budgets(config: Config) -> list[tuple[str, OutageBudget]]:
    """(owner, its budget) for every load-balanced name of every zone, in zone order."""
    budgets = {name: outage_budget(config, name) for name in config.load_balancers}
    return [
        (owner, budgets[lb])
        for zone in config.zones
        for owner, lb in sorted(zone.lb_names.items())
        if lb in budgets
    ]
