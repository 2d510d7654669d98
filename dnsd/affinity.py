"""Zonal affinity: which backends of the chosen pool may answer (docs/steering.md, zonal affinity).

Three steps, each recorded with its reason for `dnsd explain`:
1. the original eligible set, from the pool's failover policy;
2. whether there is a zonal match for a compatible client;
3. the modified eligible set, from the affinity mode and spillover ratio.
Pure: the health view, the pool and the client's zone are arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from dnsd.config.model import Backend, Pool
from dnsd.health.view import HealthView

OriginalKind = Literal[
    "all healthy backends",
    "all backends",
    "all healthy primaries",
    "all healthy failover backends",
    "all primaries",
    "none",
]


@dataclass(frozen=True, slots=True)
class AffinityDecision:
    original_kind: OriginalKind
    original: tuple[Backend, ...]  # E
    compatible: bool
    zonal_match: bool
    matched: tuple[Backend, ...]  # M
    intersection: tuple[Backend, ...]  # I = E ∩ M
    ratio: float | None  # |I| / |M| when SPILL_CROSS_ZONE with spillover_ratio > 0
    modified: tuple[Backend, ...]  # what the answer may contain
    reasons: tuple[str, ...]


def has_failover_policy(pool: Pool) -> bool:
    """a pool has a failover policy when a block is configured or a backend is failover."""
    return pool.failover_policy.configured or any(b.role == "failover" for b in pool.backends)


def original_eligible(
    pool: Pool, health: HealthView
) -> tuple[OriginalKind, tuple[Backend, ...], tuple[Backend, ...], str]:
    """Returns (kind, eligible set E, zonal-match test set, reason)."""
    configured = tuple(b for b in pool.backends if health.usable(pool, b))
    healthy = tuple(b for b in configured if health.is_healthy(pool, b))
    if not has_failover_policy(pool):
        if healthy:
            return "all healthy backends", healthy, configured, f"{len(healthy)} healthy"
        return "all backends", configured, configured, "none healthy: last resort, all backends"
    primaries = tuple(b for b in configured if b.role == "primary")
    failovers = tuple(b for b in configured if b.role == "failover")
    h_primaries = tuple(b for b in healthy if b.role == "primary")
    h_failovers = tuple(b for b in healthy if b.role == "failover")
    ratio = pool.failover_policy.failover_ratio
    if ratio == 0:
        triggered = not h_primaries
        why = f"{len(h_primaries)} healthy primaries, failover_ratio 0"
    else:
        share = len(h_primaries) / len(primaries) if primaries else 0.0
        triggered = share < ratio
        why = f"{len(h_primaries)}/{len(primaries)} primaries healthy = {share:.2f} vs failover_ratio {ratio}"
    if not triggered:
        return "all healthy primaries", h_primaries, primaries, f"{why}: failover not triggered"
    if h_failovers:
        return (
            "all healthy failover backends",
            h_failovers,
            failovers,
            f"{why}: failover triggered, {len(h_failovers)} healthy failover backends",
        )
    if h_primaries:
        return (
            "all healthy primaries",
            h_primaries,
            primaries,
            f"{why}: no healthy failover backend",
        )
    if pool.failover_policy.drop_traffic_if_unhealthy:
        return "none", (), primaries, "nothing healthy and drop_traffic_if_unhealthy: no answer"
    return "all primaries", primaries, primaries, "nothing healthy: last resort, all primaries"


def client_compatible(pool: Pool, client_zone: str | None, zone_regions: Mapping[str, str]) -> bool:
    """the client's zone is known and belongs to the pool's region.

    A zone's region comes from the pools whose backends are in it (compile time). A pool
    without a `region` accepts a client whose zone one of its own backends is in.
    """
    if client_zone is None:
        return False
    if pool.region is None:
        return any(b.zone == client_zone for b in pool.backends)
    return zone_regions.get(client_zone) == pool.region


def select_backends(
    pool: Pool,
    health: HealthView,
    client_zone: str | None,
    zone_regions: Mapping[str, str],
) -> AffinityDecision:
    kind, original, test_set, why = original_eligible(pool, health)
    reasons = [f"original eligible: {kind} ({why})"]
    mode = pool.zonal_affinity.mode
    compatible = client_compatible(pool, client_zone, zone_regions)

    def done(
        modified: tuple[Backend, ...],
        reason: str,
        match: bool = False,
        matched: tuple[Backend, ...] = (),
        inter: tuple[Backend, ...] = (),
        ratio: float | None = None,
    ) -> AffinityDecision:
        reasons.append(reason)
        return AffinityDecision(
            kind, original, compatible, match, matched, inter, ratio, modified, tuple(reasons)
        )

    if not original:
        return done((), "empty eligible set: the pool cannot answer for this client")
    if mode == "DISABLED":
        return done(original, "zonal affinity disabled: original set")
    if not compatible:
        return done(
            original, f"client zone {client_zone or 'unknown'} not compatible: original set"
        )
    matched = tuple(b for b in test_set if b.zone == client_zone)
    if not matched:
        return done(original, f"no zonal match in {client_zone}: original set")
    matched_ids = {id(b) for b in matched}
    inter = tuple(b for b in original if id(b) in matched_ids)
    if mode == "STAY_WITHIN_ZONE":
        if inter:
            return done(
                inter,
                "STAY_WITHIN_ZONE: eligible backends in the client's zone",
                True,
                matched,
                inter,
            )
        return done(
            matched,
            "STAY_WITHIN_ZONE: none eligible in zone, stay with the zone's backends",
            True,
            matched,
            inter,
        )
    spill = pool.zonal_affinity.spillover_ratio
    if spill == 0.0:
        if inter:
            return done(
                inter, "SPILL_CROSS_ZONE ratio 0: eligible backends in zone", True, matched, inter
            )
        return done(
            original, "SPILL_CROSS_ZONE ratio 0: none eligible in zone, spill", True, matched, inter
        )
    ratio = len(inter) / len(matched)
    if ratio >= spill:
        return done(
            inter,
            f"SPILL_CROSS_ZONE: {len(inter)}/{len(matched)} = {ratio:.2f} >= {spill}: stay",
            True,
            matched,
            inter,
            ratio,
        )
    return done(
        original,
        f"SPILL_CROSS_ZONE: {len(inter)}/{len(matched)} = {ratio:.2f} < {spill}: spill",
        True,
        matched,
        inter,
        ratio,
    )
