"""The status document (`GET /api/v1/status`): pools, backends, health per probe source,
RTT, load balancers with their active pool per region, recent events, overrides."""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from types import MappingProxyType
from typing import Any, TypeVar

from dnslib import QTYPE

from dnsd import __version__
from dnsd.admin.control import ServerControl
from dnsd.admin.override_meta import active_overrides
from dnsd.config.pool_refs import nested_lb
from dnsd.events.record import iso_z
from dnsd.geo.age import geoip_status
from dnsd.geo.locate import Location
from dnsd.geo.regions import REGIONS
from dnsd.health.sources import SourceHealth
from dnsd.steering import ClientInfo, SteeringInputs, ramp, steer, waterfall

T = TypeVar("T")
PROBE_CLIENT = ipaddress.ip_address("192.0.2.1")  # a placeholder address: location is set directly


def source_document(h: SourceHealth) -> dict[str, Any]:
    """One probe source of one backend; a stale one (its node lost) shows what it said last
    and when (docs/health.md, stale sources)."""
    doc: dict[str, Any] = {
        "state": "stale" if h.stale else h.state.state,
        "rtt_ms": round(h.rtt.ewma_ms, 3) if h.rtt else None,
        "samples": h.rtt.samples if h.rtt else 0,
        "last_at": h.state.last.at if h.state.last else None,
        "last_error": h.state.last.error if h.state.last else None,
    }
    if h.stale:
        doc["last_state"] = h.state.state
        doc["last_seen"] = h.state.since
    return doc


DEFAULT_LIMIT = 100  # pools and load balancers per status document, unless asked otherwise
MAX_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class Page:
    """Which part of the status is asked for: names containing `lb` / `pool` (a load
    balancer matches `lb` by its name or a DNS name pointing at it, and `pool` when it can
    answer from that pool), `limit` from `offset`."""

    lb: str = ""
    pool: str = ""
    limit: int = DEFAULT_LIMIT
    offset: int = 0

    def take(self, items: Iterable[T], match: Callable[[T], bool]) -> tuple[list[T], int]:
        """The page of the matching items, and how many match in all. O(items) with a
        cheap test each: nothing per item is built beyond the page."""
        page: list[T] = []
        total = 0
        for item in items:
            if match(item):
                if self.offset <= total < self.offset + self.limit:
                    page.append(item)
                total += 1
        return page, total


def status_document(
    server: ServerControl, now: float, events: int = 50, page: Page | None = None
) -> dict[str, Any]:
    """The status for docs/api.md, status at scale: built only for the page asked for
    (default: the first 100 pools and load balancers), with the totals."""
    page = page or Page()
    snap, store = server.holder.current, server.store
    view = store.view
    lb_text, pool_text = page.lb.lower(), page.pool.lower()
    pool_page, pools_total = page.take(
        snap.config.pools.values(), lambda p: pool_text in p.name.lower()
    )
    names = dns_names(snap)
    lb_page, lbs_total = page.take(
        snap.config.load_balancers.values(),
        lambda lb: (
            (lb_text in lb.name.lower() or any(lb_text in n for n in names.get(lb.name, ())))
            and (not pool_text or any(pool_text in ref.lower() for ref in lb_pools(lb)))
        ),
    )
    pools = []
    for pool in pool_page:
        backends = []
        for backend in pool.backends:
            health = view.backend(pool, backend)
            sources = {
                source: source_document(h)
                for source, h in store.source_states(pool, backend).items()
            }
            backends.append(
                {
                    "name": backend.name,
                    "address": str(backend.address or backend.hostname),
                    "zone": backend.zone,
                    "role": backend.role,
                    "weight": backend.weight,
                    "enabled": backend.enabled,
                    "healthy": health.healthy,
                    "probed": health.probed,
                    "override": health.override,
                    "quorum": "degraded" if health.quorum_degraded else "ok",
                    # docs/health.md "Lost quorum": since when, and `held` / `fresh`
                    "quorum_since": None
                    if health.quorum_since is None
                    else iso_z(health.quorum_since),
                    "quorum_verdict": None if not health.quorum_degraded else health.quorum_mode,
                    "sources_fresh": health.sources_fresh,
                    "sources": sources,
                }
            )
        monitor = pool.monitor
        timing = snap.config.monitors.get(monitor) if monitor else None
        pools.append(
            {
                "name": pool.name,
                "healthy": view.pool_healthy(pool),
                "override": view.pool_overrides.get(pool.name),
                "monitor": monitor,
                # what outage bounds are computed from (`dnsd drill run`)
                "monitor_timing": None
                if timing is None
                else {
                    "interval_s": timing.interval_s,
                    "timeout_s": timing.timeout_s,
                    "healthy_threshold": timing.healthy_threshold,
                    "unhealthy_threshold": timing.unhealthy_threshold,
                },
                "region": pool.region,
                "minimum_origins": pool.minimum_origins,
                "load": waterfall.load_status(pool, view),  # capacity waterfall: how full it is
                "backends": backends,
            }
        )
    lbs = []
    for lb in lb_page:
        active, failed, first = region_details(server, lb, now)
        lbs.append(
            {
                "name": lb.name,
                "names": list(names.get(lb.name, ())[:MAX_NAMES]),
                "names_total": len(names.get(lb.name, ())),
                "policy": lb.steering,
                "ttl": lb.ttl,
                "trickle_ratio": view.trickle_ratio(lb.name, lb.trickle_ratio),
                "trickle_override": view.trickle_overrides.get(lb.name),
                "default_pools": list(lb.default_pools),
                "fallback_pool": lb.fallback_pool,
                "when_all_down": lb.when_all_down,
                "ramp": ramp.ramp_status(lb, view, now),
                "active": active,
                # per region answered with nothing healthy: the when_all_down rule answering
                "all_down": {
                    region: all_down_rule(snap.config, lb, path)
                    for region, path in active.items()
                    if path.endswith(FAIL_OPEN)
                },
                "failed_over": failed,
                "first_choice": first,
            }
        )
    return {
        "version": __version__,
        "node": {"name": snap.node.name, "pop_region": snap.node.pop_region},
        "config": {
            "generation": snap.generation,
            "source": snap.source,
            "loaded_at": snap.loaded_at,
        },
        "geoip": geoip_status(snap.geo, now),  # build date and age: a stale one misplaces
        "health_generation": view.generation,
        "ready": server.ready,
        "bus": server.bus_status(),
        "dnssec": {
            zone: [
                {"tag": k.tag, "algorithm": k.algorithm, "role": k.role, "state": k.state(now)}
                for k in keys.keys
            ]
            for zone, keys in snap.signing.items()
        },
        "summary": summary(server, now),
        "pools": pools,
        "load_balancers": lbs,
        "total": {"pools": pools_total, "load_balancers": lbs_total},
        "offset": page.offset,
        "limit": page.limit,
        "events": [e.to_json() for e in store.events.recent(events)],
        "overrides": {
            "backends": {f"{p}/{b}": s for (p, b), s in store.backend_overrides.items()},
            "pools": dict(store.pool_overrides),
            "load_balancers": {k: {"trickle_ratio": v} for k, v in store.trickle_overrides.items()},
        },
        # with who set each, why and until when (what GET /api/v1/overrides lists)
        "overrides_active": active_overrides(store.overrides),
    }


MAX_NAMES = 20  # DNS names listed per load balancer; `names_total` says how many there are


def dns_names(snap: Any) -> dict[str, tuple[str, ...]]:
    """Per load balancer, the DNS names whose records point at it — the names users know —
    built once per snapshot."""
    names: dict[str, tuple[str, ...]] = snap.derived.get(
        "status dns names", partial(_dns_names, snap.config)
    )
    return names


def _dns_names(config: Any) -> dict[str, tuple[str, ...]]:
    found: dict[str, list[str]] = {}
    for zone in config.zones:
        for owner, lb in zone.lb_names.items():
            found.setdefault(lb, []).append(owner.rstrip(".").lower())
    return {lb: tuple(sorted(owners)) for lb, owners in found.items()}


def summary(server: ServerControl, now: float) -> dict[str, Any]:
    """What the status page's banner says, over the whole configuration (not one page):
    backends down by probes and by override, regions off their first choice, overrides.
    Recomputed when the config or a health *state* changes (RTTs alone cannot move a
    failover order, as for `failover` alerts)."""
    snap, store = server.holder.current, server.store
    view = store.view
    known = snap.derived.peek(SUMMARY)
    if known is not None and known[0] == view.states_generation:
        return dict(known[1])
    backends = down = overridden = drained = 0
    for pool in snap.config.pools.values():
        for backend in pool.backends:
            backends += 1
            health = view.backend(pool, backend)
            if health.override == "drain":
                drained += 1
            elif health.override == "down":
                overridden += 1
            elif not health.healthy:
                down += 1
    # Load balancers of one class (configured alike but for the name) fail over alike,
    # unless a trickle override names one: one steering per class, not per name.
    lbs = snap.config.load_balancers
    regions = lbs_failed = 0
    for names in snap.lb_graph.members:
        alike = [n for n in names if n not in view.trickle_overrides]
        own = [n for n in names if n in view.trickle_overrides]
        for name, count in [*([(alike[0], len(alike))] if alike else []), *((n, 1) for n in own)]:
            failed = len(region_states(server, lbs[name], now)[1])
            regions += failed * count
            lbs_failed += count if failed else 0
    overrides = store.overrides
    doc = {
        "backends": backends,
        "backends_down": down,  # by probes
        "backends_overridden_down": overridden,
        "backends_drained": drained,
        "pools_down": sum(not view.pool_healthy(p) for p in snap.config.pools.values()),
        "load_balancers": len(snap.config.load_balancers),
        "load_balancers_failed_over": lbs_failed,
        "regions_failed_over": regions,
        "overrides_active": len(overrides.backends) + len(overrides.pools) + len(overrides.trickle),
    }
    snap.derived.put(SUMMARY, (view.states_generation, doc))
    return dict(doc)


SUMMARY = "status summary"  # (the health states generation, the banner's document)


def lb_pools(lb: Any) -> tuple[str, ...]:
    return (*lb.pool_refs(), *((lb.fallback_pool,) if lb.fallback_pool else ()))


def region_states(server: ServerControl, lb: Any, now: float) -> tuple[dict[str, str], list[str]]:
    """`region_details` without the first choices."""
    active, failed, _ = region_details(server, lb, now)
    return active, failed


def region_details(
    server: ServerControl, lb: Any, now: float
) -> tuple[dict[str, str], list[str], dict[str, str]]:
    """Per client region, the chain of entries that answers now — overrides and a trickle
    of 1.0 (a manual failover) included; a trickle below 1 is a share, shown beside — and
    the regions not on their first choice (the primary, at any level of the chain), and
    for each of those the first choice it left (the entry at the level where it left).

    Load balancers configured alike (one class, dnsd.xfr.lb_answers) share one answer per
    health view: a status page of 100 load balancers, or the failover check of 10,000,
    steers once per class."""
    active, failed, first = shared_region_details(server, lb, now)
    return dict(active), list(failed), dict(first)


def shared_region_states(
    server: ServerControl, lb: Any, now: float
) -> tuple[Mapping[str, str], Sequence[str]]:
    """`region_states` without the copies: the objects every load balancer of the class
    shares, never to be changed (the metrics render each class's text once per view)."""
    active, failed, _ = shared_region_details(server, lb, now)
    return active, failed


def shared_region_details(
    server: ServerControl, lb: Any, now: float
) -> tuple[Mapping[str, str], Sequence[str], Mapping[str, str]]:
    """`region_details` without the copies (shared by the class; never to be changed)."""
    return region_details_under(server.holder.current, server.store.view, lb, now)


def region_details_under(
    snap: Any, view: Any, lb: Any, now: float
) -> tuple[Mapping[str, str], Sequence[str], Mapping[str, str]]:
    """`shared_region_details` under a given snapshot and health view (the failover
    watch compares the ones before a change with the ones after)."""
    graph = snap.lb_graph
    kind = graph.classes[lb.name]
    generation = view.generation if kind in graph.by_rtt else view.states_generation
    reached = graph.tree(lb.name)
    if len(reached) == 1:  # the common case: nothing nested
        manual: tuple[str, ...] = (
            (lb.name,) if view.trickle_ratio(lb.name, float(lb.trickle_ratio)) >= 1.0 else ()
        )
    else:
        manual = tuple(sorted(n for n in reached if view.trickle_ratio(n, _ratio(snap, n)) >= 1.0))
    known: dict[Any, Any] = snap.derived.get("status active", dict)
    key = (kind, generation, manual)
    hit = known.get(key)
    if hit is not None:
        return hit
    made = _region_states(snap, view, lb, set(reached), manual, now)
    _keep(known, key, made)
    return made


def health_failed_over(server: ServerControl, lb: Any, now: float) -> Sequence[str]:
    """`health_failed_under` for what is served now."""
    return health_failed_under(server.holder.current, server.store.view, lb, now)


def health_failed_under(snap: Any, view: Any, lb: Any, now: float) -> Sequence[str]:
    """The regions off their first choice because of health, not planned work: those off
    it whose answering pool is not the one the planned work alone gives — the same
    overrides (pools and backends forced down or up, drains), the same manual failover
    (a trickle of 1.0), every probe passing. So a pool forced down, a drain or a manual
    failover is no incident, nor are its backends failing their probes behind it (the
    maintenance itself); a failure the plan does not explain is one (the rest of a pool
    failing beside a drained backend, the pool traffic was moved to failing). What
    `dnsd_lb_failed_over_by_health` exports and the failover alert pages on."""
    active, failed, _ = region_details_under(snap, view, lb, now)
    if not failed:
        return ()
    graph = snap.lb_graph
    reached = graph.tree(lb.name)
    if len(reached) == 1:
        manual: tuple[str, ...] = (
            (lb.name,) if view.trickle_ratio(lb.name, float(lb.trickle_ratio)) >= 1.0 else ()
        )
    else:
        manual = tuple(sorted(n for n in reached if view.trickle_ratio(n, _ratio(snap, n)) >= 1.0))
    kind = graph.classes[lb.name]
    generation = view.generation if kind in graph.by_rtt else view.states_generation
    # per class, health view and manual failovers: what the planned work alone answers
    known: dict[Any, Any] = snap.derived.get("status planned", dict)
    key = (kind, generation, manual)
    planned = known.get(key)
    if planned is None:
        planned = _region_states(snap, planned_view(snap, view), lb, set(reached), manual, now)[0]
        _keep(known, key, planned)
    return [r for r in failed if active[r] != planned.get(r)]


def planned_view(snap: Any, view: Any) -> Any:
    """`view` as the planned work alone leaves it: every backend passing its probes, the
    overrides kept (kept with the snapshot, for the latest view)."""
    known = snap.derived.peek(PLANNED_VIEW)
    if known is not None and known[0] is view:
        return known[1]
    backends = {
        key: h if h.healthy == (h.override != "down") else replace(h, healthy=h.override != "down")
        for key, h in view.backends.items()
    }
    planned = replace(view, backends=MappingProxyType(backends), change=None)
    snap.derived.put(PLANNED_VIEW, (view, planned))
    return planned


PLANNED_VIEW = "status planned view"  # the latest view and its every-probe-passing twin
FAIL_OPEN = " (fail open)"  # after the chain: nothing was healthy, a fallback answers


def answering_pool(active: str) -> tuple[str, bool]:
    """The pool at the end of an `active` chain ("lb:inner -> eu (fail open)"), and whether
    it answers because nothing was healthy (what the metrics export per region)."""
    fail_open = active.endswith(FAIL_OPEN)
    chain = active[: -len(FAIL_OPEN)] if fail_open else active
    return chain.rsplit(" -> ", 1)[-1], fail_open


def all_down_rule(config: Any, lb: Any, active: str) -> str | None:
    """The `when_all_down` rule answering an `active` chain (docs/steering.md, when all pools
    are down), None while something healthy answers: `fallback` when a pool answers anyway,
    else the rule of the load balancer at the end of the chain (`lb` itself for "")."""
    if not active.endswith(FAIL_OPEN):
        return None
    parts = [part for part in active[: -len(FAIL_OPEN)].split(" -> ") if part]
    if parts and (inner := nested_lb(parts[-1])) is None:
        return "fallback"
    owner = config.load_balancers.get(inner) if parts else lb
    return None if owner is None else str(owner.when_all_down)


MAX_ACTIVE = 4_096  # entries kept per snapshot


def _keep(known: dict[Any, Any], key: Any, value: Any) -> None:
    if len(known) >= MAX_ACTIVE:
        known.pop(next(iter(known)))
    known[key] = value


def _ratio(snap: Any, lb_name: str) -> float:
    return float(snap.config.load_balancers[lb_name].trickle_ratio)


def _region_states(
    snap: Any, view: Any, lb: Any, reached: set[str], manual: tuple[str, ...], now: float
) -> tuple[dict[str, str], list[str], dict[str, str]]:
    ratios = {name: (1.0 if name in manual else 0.0) for name in reached}
    # where answers are heading: a ramp in force has its own entry (docs/steering.md, ramps)
    view = replace(view, trickle_overrides=MappingProxyType(ratios), ramps=MappingProxyType({}))
    active: dict[str, str] = {}
    failed: list[str] = []
    first: dict[str, str] = {}
    for region in (*REGIONS, None):
        location = Location(region=region, source="pop_region")
        client = ClientInfo(PROBE_CLIENT, location=location, pop=snap.node.name)
        decision = steer(SteeringInputs(snap, view, client, random.Random(0), now), lb, QTYPE.A)
        path = " -> ".join(decision.path())
        name = region or "unknown"
        active[name] = path + (FAIL_OPEN if decision.any_fail_open() else "")
        level: Any = decision
        while level is not None:
            if level.primary is not None and level.pool != level.primary:
                failed.append(name)
                first[name] = level.primary
                break
            level = level.nested
    return active, failed, first
