"""`dynamic`: the healthy pool with the lowest EWMA round-trip time (docs/steering.md, dynamic).

Which vantage point counts, for a client in region R: (1) RTT profiles measured from R when
any pool has current data from there (several nodes sharing health, or monitor `sources`
naming R); else (2) the answering node's own profiles (its probe source: `pop_region`, or
`local`); else (3) failover order. So a single node without `sources` steers every client
by its own measurements. Pools with current data come first, lowest RTT first; pools
without data follow in failover order. The fallback pool takes part when healthy.
"""

from __future__ import annotations

from dnsd.config.model import LoadBalancer
from dnsd.steering.inputs import (
    Able,
    Ordering,
    SteeringInputs,
    defaults_then_fallback,
    last_pool_rtt_ms,
    pool_rtt_ms,
)


def order(lb: LoadBalancer, able: Able, inp: SteeringInputs) -> Ordering:
    refs = defaults_then_fallback(lb, able)
    region = inp.client.location.region
    own = inp.snap.node.probe_source
    sources = [(region, f"client region {region}")] if region is not None else []
    if own != region:
        sources.append((own, f"this node ({own})"))
    for source, vantage in sources:
        rtts = {r: pool_rtt_ms(inp, lb, r, source) for r in refs}
        measured = sorted((r for r in refs if rtts[r] is not None), key=lambda r: rtts[r])  # type: ignore[arg-type, return-value]
        if measured:
            rest = [r for r in refs if rtts[r] is None]
            shown = ", ".join(f"{r} {rtts[r]:.1f} ms" for r in measured)
            primary, why = _primary(lb, able, inp, source, measured[0], rtts[measured[0]])  # type: ignore[arg-type]
            return Ordering(
                measured + rest,
                f"dynamic: RTT measured from {vantage}: {shown}{why}",
                location_dependent=True,
                primary=primary,
                rtt_source=source,
            )
    why = "no current RTT data" + (f" from {region} or this node" if region else " on this node")
    return Ordering(
        refs,
        f"dynamic: {why}: failover order",
        location_dependent=region is not None,
        primary=lb.default_pools[0],
    )


def _primary(
    lb: LoadBalancer, able: Able, inp: SteeringInputs, source: str, fastest: str, fastest_ms: float
) -> tuple[str, str]:
    """docs/steering.md, trickle: the primary is the best-ranked pool before health is applied — a
    listed pool that failed keeps its last measured RTT, so when the fastest pool fails the
    trickle does not move to a third pool; every answer fails over (the trickle plays no
    part while the primary is down)."""
    best, best_ms = fastest, fastest_ms
    for ref in lb.default_pools:
        if ref == fastest:
            continue
        last = last_pool_rtt_ms(inp, lb, ref, source)
        if last is not None and last < best_ms and not able(ref):
            best, best_ms = ref, last
    return best, "" if best == fastest else f" (primary {best}, {best_ms:.1f} ms, is down)"
