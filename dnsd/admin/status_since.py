"""Since and until when: the times the status page tells an outage, a failed-over region or
a down backend began (read from the events journal), and an override's author and span."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dnsd.admin.html import parse_utc, utc
from dnsd.admin.region_map import RegionFact

DAY_S = 86_400.0


def _timed(events: Iterable[Mapping[str, Any]]) -> list[tuple[float, Mapping[str, Any]]]:
    timed = ((parse_utc(e.get("time")), e) for e in events)
    return sorted(((at, e) for at, e in timed if at is not None), key=lambda pair: pair[0])


def regions_off_since(lb: str, events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Per client region of `lb` off its first choice, when it left it: the `failover` (or
    `fail_open`) event that took it away, not a later move on to another pool; a `failback`
    ends it. Only what the events kept (the last 24 h) say."""
    left: dict[str, float] = {}
    for at, e in _timed(e for e in events if e.get("lb") == lb):
        for region in e.get("regions") or ():
            if e.get("kind") in ("failover", "fail_open"):
                left.setdefault(region, at)
            elif e.get("kind") == "failback":
                left.pop(region, None)
    return left


def backends_down_since(events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Per `pool/backend` found unhealthy by its probes, since when (its `backend_health`
    event; a healthy one ends it)."""
    down: dict[str, float] = {}
    health = {id(e): e for e in events if e.get("kind") == "backend_health" and e.get("backend")}
    for at, e in _timed(health.values()):  # a pool's events are in each of its lbs' lists
        key = f"{e.get('pool')}/{e['backend']}"
        if str(e.get("new")) == "unhealthy":
            down.setdefault(key, at)
        else:
            down.pop(key, None)
    return down


def since_text(at: float | None, now: float) -> str:
    """`since 2026-12-02 13:50:02Z (for 3 min)`; without an event in the last 24 h, said."""
    if at is None:
        return "since before the last 24 h of events"
    return f"since {utc(at)} (for {duration(now - at)})"


def duration(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < DAY_S:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86_400} d {s % 86_400 // 3600} h"


def outage_since(
    lb: Mapping[str, Any], facts: list[RegionFact], events: Iterable[Mapping[str, Any]]
) -> tuple[bool, float | None]:
    """(is this load balancer in a probe-driven outage, since when — None: not in the
    events kept)."""
    out = [f.region for f in facts if f.state in ("failover", "fail_open")]
    if not out:
        return False, None
    left = regions_off_since(lb["name"], events)
    known = [left[r] for r in out if r in left]
    return True, (min(known) if len(known) == len(out) else None)


def override_text(o: Mapping[str, Any], now: float) -> str:
    """`pool eu down — “INC-1” — by oncall since …Z, until …Z (1h 59m left)`."""
    what = {"load_balancer": "load balancer"}.get(o["kind"], o["kind"])
    value = o.get("state", o.get("trickle_ratio"))
    text = f"{what} {o['target']} " + (f"trickle {value}" if "trickle_ratio" in o else str(value))
    if value == 1.0 and "trickle_ratio" in o:
        text += " (manual failover)"
    text += f" — “{o['reason']}”" if o.get("reason") else " — no reason given"
    text += f" — by {o.get('actor') or 'unknown'}"
    if o.get("since"):
        text += f" since {utc(parse_utc(o['since']))}"
    expires = parse_utc(o.get("expires"))
    text += f", until {utc(expires)} ({_left(expires - now)} left)" if expires else ", no expiry"
    return text


def _left(seconds: float) -> str:
    minutes = max(0, int(seconds // 60))
    return f"{minutes // 60}h {minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"
