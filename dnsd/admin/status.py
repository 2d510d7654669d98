"""The status document (`GET /api/v1/status`): pools, backends, health per probe source,
RTT, load balancers with their active pool per region, recent events, overrides."""

from __future__ import annotations

import ipaddress
import random
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from dnslib import QTYPE

from dnsd import __version__
from dnsd.admin.control import ServerControl
from dnsd.geo.locate import Location
from dnsd.geo.regions import REGIONS
from dnsd.health.store import SourceHealth
from dnsd.steering import ClientInfo, SteeringInputs, steer

PROBE_CLIENT = ipaddress.ip_address("192.0.2.1")  # a placeholder address: location is set directly


def source_document(h: SourceHealth) -> dict[str, Any]:
    """One probe source of one backend; a stale one (its node lost) shows what it said last
    and when (health.md "Stale sources")."""
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


def status_document(server: ServerControl, now: float, events: int = 50) -> dict[str, Any]:
    snap, store = server.holder.current, server.store
    view = store.view
    pools = []
    for pool in snap.config.pools.values():
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
                "backends": backends,
            }
        )
    lbs = []
    for lb in snap.config.load_balancers.values():
        lbs.append(
            {
                "name": lb.name,
                "policy": lb.steering,
                "ttl": lb.ttl,
                "trickle_ratio": view.trickle_ratio(lb.name, lb.trickle_ratio),
                "trickle_override": view.trickle_overrides.get(lb.name),
                "default_pools": list(lb.default_pools),
                "fallback_pool": lb.fallback_pool,
                "active": active_per_region(server, lb, now),
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
        "pools": pools,
        "load_balancers": lbs,
        "events": [e.to_json() for e in reversed(list(store.events)[-events:])],
        "overrides": {
            "backends": {f"{p}/{b}": s for (p, b), s in store.backend_overrides.items()},
            "pools": dict(store.pool_overrides),
            "load_balancers": {k: {"trickle_ratio": v} for k, v in store.trickle_overrides.items()},
        },
    }


def active_per_region(server: ServerControl, lb: Any, now: float) -> dict[str, str]:
    """The pool a client from each region gets (before the trickle draw); also what
    `failover` alerts compare (dnsd.admin.webhooks)."""
    snap = server.holder.current
    # Trickle is left out (every LB's ratio overridden to 0): the ratio is shown beside.
    no_trickle = MappingProxyType(dict.fromkeys(snap.config.load_balancers, 0.0))
    view = replace(server.store.view, trickle_overrides=no_trickle)
    active: dict[str, str] = {}
    for region in (*REGIONS, None):
        location = Location(region=region, source="pop_region")
        client = ClientInfo(PROBE_CLIENT, location=location, pop=snap.node.name)
        decision = steer(SteeringInputs(snap, view, client, random.Random(0), now), lb, QTYPE.A)
        path = " -> ".join(decision.path())
        active[region or "unknown"] = path + (" (fail open)" if decision.fail_open else "")
    return active
