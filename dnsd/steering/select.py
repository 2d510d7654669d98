"""The steering pipeline for one load-balanced name (steering.md §1):

order the LB's pools with its policy (only pools that are healthy and able to answer this
client) → trickle picks candidate[0] or candidate[1] → a nested `lb:` entry runs its own
steering → zonal affinity picks the eligible backends → the answer's addresses. Nothing
healthy anywhere → the fallback pool (else the first default pool) answers regardless of
its health, and the decision says so. Pure: randomness and time come in `inp`.
"""

from __future__ import annotations

from collections.abc import Callable

from dnsd.affinity import original_eligible, select_backends
from dnsd.config.model import LB_PREFIX, LoadBalancer
from dnsd.steering import dynamic, failover, geo, proximity, weighted
from dnsd.steering.decision import Candidate, LbDecision
from dnsd.steering.inputs import Ordering, SteeringInputs, pool_rtt_ms
from dnsd.steering.pick import pick_answer

Policy = Callable[[LoadBalancer, Callable[[str], bool], SteeringInputs], Ordering]
POLICIES: dict[str, Policy] = {
    "off": failover.order,
    "random": weighted.order,
    "dynamic": dynamic.order,
    "geo": geo.order,
    "proximity": proximity.order,
}
MAX_DEPTH = 8
HASH_PREFIX = {4: 24, 6: 56}


def steer(inp: SteeringInputs, lb: LoadBalancer, qtype: int, depth: int = 0) -> LbDecision:
    health = inp.health
    decision = LbDecision(lb=lb.name, policy=lb.steering, ttl=lb.ttl)
    able = _able_checker(inp, depth)
    region = inp.client.location.region
    decision.candidates = [
        Candidate(ref, able(ref), pool_rtt_ms(inp, lb, ref, region)) for ref in lb.pool_refs()
    ]
    ordering = POLICIES[lb.steering](lb, able, inp)
    decision.ordered = ordering.refs
    decision.reasons.append(ordering.reason)
    if ordering.location_dependent:
        decision.scope_prefixes.append(inp.client.location.prefix_len or inp.client.max_prefix)

    refs = ordering.refs
    ratio = health.trickle_ratio(lb.name, lb.trickle_ratio)
    decision.trickle_ratio = ratio
    if not refs:
        chosen = lb.fallback_pool or lb.default_pools[0]
        decision.fail_open = True
        decision.reasons.append(f"nothing healthy: {chosen} answers regardless of its health")
    elif len(refs) >= 2 and ratio > 0:
        draw = inp.rng.random()
        decision.trickle_draw = draw
        chosen = refs[1] if draw < ratio else refs[0]
        decision.reasons.append(f"trickle {ratio}: draw {draw:.3f} -> {chosen}")
    else:
        chosen = refs[0]
        decision.reasons.append(f"chosen {chosen}")
    decision.pool = chosen

    if chosen.startswith(LB_PREFIX):
        inner = inp.snap.config.load_balancers[chosen[len(LB_PREFIX) :]]
        if depth >= MAX_DEPTH:
            decision.reasons.append("nesting too deep: no answer")
            return decision
        decision.nested = steer(inp, inner, qtype, depth + 1)
        return decision

    pool = inp.snap.config.pools[chosen]
    affinity = select_backends(pool, health, inp.client.zone, inp.snap.zone_regions)
    decision.affinity = affinity
    if pool.zonal_affinity.mode != "DISABLED" and inp.snap.config.client_zones:
        decision.scope_prefixes.append(inp.client.zone_prefix or inp.client.max_prefix)
    if lb.selection == "hash":
        decision.scope_prefixes.append(HASH_PREFIX[inp.client.address.version])
    decision.addresses, decision.cname = pick_answer(
        lb, affinity.modified, qtype, inp.client.subnet_key(), inp.rng
    )
    return decision


def _able_checker(inp: SteeringInputs, depth: int) -> Callable[[str], bool]:
    """ref → healthy and able to answer this client (memoised for this query).

    A pool is able when healthy (health.md) and its original eligible set is not empty
    (drop_traffic_if_unhealthy can empty it). A nested `lb:NAME` is able when the inner
    load balancer has an able pool (steering.md §2.7).
    """
    memo: dict[str, bool] = {}
    config = inp.snap.config

    def able(ref: str) -> bool:
        if ref in memo:
            return memo[ref]
        memo[ref] = False  # guards against cycles (also rejected at load time)
        if ref.startswith(LB_PREFIX):
            inner = config.load_balancers.get(ref[len(LB_PREFIX) :])
            ok = inner is not None and depth < MAX_DEPTH and any(able(r) for r in inner.pool_refs())
        else:
            pool = config.pools.get(ref)
            ok = (
                pool is not None
                and inp.health.pool_healthy(pool)
                and bool(original_eligible(pool, inp.health)[1])
            )
        memo[ref] = ok
        return ok

    return able
