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
    rtt_ages_out,
    unique,
)


def order(lb: LoadBalancer, able: Able, inp: SteeringInputs) -> Ordering:
    refs = defaults_then_fallback(lb, able)
    region = inp.client.location.region
    own = inp.snap.node.probe_source
    sources = [(region, f"client region {region}")] if region is not None else []
    if own != region:
        sources.append((own, f"this node ({own})"))
    primary, why = _primary(lb, able, inp, sources)
    until = rtt_ages_out(inp, lb)
    for source, vantage in sources:
        rtts = {r: pool_rtt_ms(inp, lb, r, source) for r in refs}
        measured = sorted((r for r in refs if rtts[r] is not None), key=lambda r: rtts[r])  # type: ignore[arg-type, return-value]
        if measured:
            rest = [r for r in refs if rtts[r] is None]
            shown = ", ".join(f"{r} {rtts[r]:.1f} ms" for r in measured)
            return Ordering(
                measured + rest,
                f"dynamic: RTT measured from {vantage}: {shown}{why}",
                location_dependent=True,
                primary=primary,
                rtt_source=source,
                rtt_until=until,
            )
    nodata = "no current RTT data" + (f" from {region} or this node" if region else " on this node")
    return Ordering(
        refs,
        f"dynamic: {nodata}: failover order{why}",
        location_dependent=region is not None,
        primary=primary,
        rtt_until=until,
    )


def _primary(
    lb: LoadBalancer, able: Able, inp: SteeringInputs, sources: list[tuple[str, str]]
) -> tuple[str, str]:
    """docs/steering.md, trickle: the primary is the best-ranked pool before health is applied.

    A listed pool that failed keeps its last measured RTT, a healthy one ranks by its current
    RTT, from the first vantage point (in the order `order` walks them) where any listed pool
    has either. So when the fastest pool fails the primary stays that pool — even when the
    survivors have no current data (unmonitored pools), or only another vantage point measured
    them — and every answer fails over to the first healthy candidate: the trickle plays no
    part while the primary is down, and never sends a share to a third pool. No data anywhere:
    the first default pool (failover order)."""
    listed = unique(list(lb.default_pools) + ([lb.fallback_pool] if lb.fallback_pool else []))
    for source, _vantage in sources:
        ranked: list[tuple[float, int, str]] = []
        for i, ref in enumerate(listed):
            up = able(ref)
            rtt = (
                pool_rtt_ms(inp, lb, ref, source) if up else last_pool_rtt_ms(inp, lb, ref, source)
            )
            if rtt is not None:
                ranked.append((rtt, i, ref))
        if ranked:
            best_ms, _, best = min(ranked)
            down = "" if able(best) else f" (primary {best}, {best_ms:.1f} ms, is down)"
            return best, down
    return lb.default_pools[0], ""
