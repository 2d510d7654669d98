"""`dynamic`: the healthy pool with the lowest EWMA round-trip time as seen from the
client's region (steering.md §2.3). Pools with current RTT data come first, lowest RTT
first; pools without data follow in failover order. With no data at all (or no client
region), plain failover order. The fallback pool takes part when healthy.
"""

from __future__ import annotations

from dnsd.config.model import LoadBalancer
from dnsd.steering.inputs import Able, Ordering, SteeringInputs, defaults_then_fallback, pool_rtt_ms


def order(lb: LoadBalancer, able: Able, inp: SteeringInputs) -> Ordering:
    refs = defaults_then_fallback(lb, able)
    region = inp.client.location.region
    rtts = {r: pool_rtt_ms(inp, lb, r, region) for r in refs}
    measured = sorted((r for r in refs if rtts[r] is not None), key=lambda r: rtts[r])  # type: ignore[arg-type, return-value]
    if not measured:
        why = "no client region" if region is None else f"no current RTT data from {region}"
        return Ordering(
            refs, f"dynamic: {why}: failover order", location_dependent=region is not None
        )
    rest = [r for r in refs if rtts[r] is None]
    shown = ", ".join(f"{r} {rtts[r]:.1f} ms" for r in measured)
    return Ordering(
        measured + rest, f"dynamic: RTT from {region}: {shown}", location_dependent=True
    )
