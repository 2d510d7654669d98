"""`geo`: pools mapped to the client's PoP, subdivision, country or region (docs/steering.md, geo).

The most specific mapping that exists wins (PoP, then US/CA subdivision — an
addition to the policy in docs/steering.md — then country, then region); its pools are
used in failover order, then the default pools, then the fallback pool when healthy.
"""

from __future__ import annotations

from dnsd.config.model import LoadBalancer
from dnsd.steering.inputs import Able, Ordering, SteeringInputs, defaults_then_fallback, unique


def order(lb: LoadBalancer, able: Able, inp: SteeringInputs) -> Ordering:
    client = inp.client
    loc = client.location
    mapped: tuple[str, ...] = ()
    where = "no mapping"
    if client.pop and client.pop in lb.pop_pools:
        mapped, where = lb.pop_pools[client.pop], f"PoP {client.pop}"
    elif loc.subdivision and f"{loc.country}-{loc.subdivision}" in lb.subdivision_pools:
        where = f"subdivision {loc.country}-{loc.subdivision}"
        mapped = lb.subdivision_pools[where.split()[1]]
    elif loc.country and loc.country in lb.country_pools:
        mapped, where = lb.country_pools[loc.country], f"country {loc.country}"
    elif loc.region and loc.region in lb.region_pools:
        mapped, where = lb.region_pools[loc.region], f"region {loc.region}"
    refs = unique([r for r in mapped if able(r)] + defaults_then_fallback(lb, able))
    healthy_mapped = [r for r in mapped if able(r)]
    if mapped and not healthy_mapped:
        where += " (all mapped pools unhealthy: default pools)"
    primary = mapped[0] if mapped else lb.default_pools[0]
    return Ordering(refs, f"geo: {where}", location_dependent=True, primary=primary)
