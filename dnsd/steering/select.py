"""The steering pipeline for one load-balanced name (steering.md §1), in two steps:

* `build_plan` — everything that is the same for every query from one client location
  while config and health stay the same: order the LB's pools with its policy (only pools
  that are healthy and able to answer this client), the fallback when nothing is healthy,
  nested `lb:` plans, and zonal affinity's eligible backends for each candidate pool. Pure
  and cacheable per (config generation, health generation, client location).
* `execute` — the per-query draws, in a fixed order: the `random` policy's weighted order,
  the trickle draw (primary or backup, steering.md §3), the nested load balancer's draws,
  the backends' weighted order. Same plan + same random source → same answer, whether the plan
  came from a cache or was just built (the fast path relies on this).

Nothing healthy anywhere → the fallback pool (else the first default pool) answers
regardless of its health, and the decision says so.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from dnsd.affinity import AffinityDecision, original_eligible, select_backends
from dnsd.config.model import LB_PREFIX, Backend, LoadBalancer, Pool
from dnsd.geo.locate import NOWHERE, Location
from dnsd.steering import dynamic, failover, geo, proximity, weighted
from dnsd.steering.decision import Candidate, LbDecision
from dnsd.steering.inputs import Ordering, SteeringInputs, pool_rtt_ms
from dnsd.steering.pick import PickDraw, candidates_for, pick_answer, pick_draws

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


@dataclass(slots=True)
class PoolPlan:
    pool: Pool
    affinity: AffinityDecision
    scope_prefixes: list[int]
    matching: list[Backend]  # the modified eligible set, of the asked address family
    scope_max: int = 0


@dataclass(slots=True)
class LbPlan:
    lb: LoadBalancer
    qtype: int
    candidates: list[Candidate]
    ordering: Ordering
    trickle_ratio: float
    fail_open_ref: str | None  # set when nothing is healthy
    backup: str | None  # the trickle's other branch: set only while the primary is healthy
    children: dict[str, LbPlan | PoolPlan] = field(default_factory=dict)
    scope_prefixes: list[int] = field(default_factory=list)
    too_deep: bool = False
    scope_max: int = 0


def steer(inp: SteeringInputs, lb: LoadBalancer, qtype: int) -> LbDecision:
    return execute(build_plan(inp, lb, qtype), inp.client.subnet_key(), inp.rng)


def build_plan(inp: SteeringInputs, lb: LoadBalancer, qtype: int, depth: int = 0) -> LbPlan:
    by_pop = lb.client_region == "pop"
    if by_pop:  # steering.md §4: every client of this node is in the node's region
        inp = replace(inp, client=replace(inp.client, location=pop_location(inp)))
    able = _able_checker(inp, depth)
    ordering = POLICIES[lb.steering](lb, able, inp)
    rtt_source = ordering.rtt_source or inp.client.location.region
    candidates = [
        Candidate(ref, able(ref), pool_rtt_ms(inp, lb, ref, rtt_source)) for ref in lb.pool_refs()
    ]
    plan = LbPlan(
        lb=lb,
        qtype=qtype,
        candidates=candidates,
        ordering=ordering,
        trickle_ratio=inp.health.trickle_ratio(lb.name, lb.trickle_ratio),
        fail_open_ref=None if ordering.refs else (lb.fallback_pool or lb.default_pools[0]),
        backup=trickle_backup(lb, ordering),
    )
    if ordering.location_dependent and not by_pop:
        plan.scope_prefixes.append(inp.client.location.prefix_len or inp.client.max_prefix)
    plan.scope_max = max(plan.scope_prefixes, default=0)
    for ref in ordering.refs or [plan.fail_open_ref or lb.default_pools[0]]:
        if ref.startswith(LB_PREFIX):
            if depth >= MAX_DEPTH:
                plan.too_deep = True
                continue
            inner = inp.snap.config.load_balancers[ref[len(LB_PREFIX) :]]
            plan.children[ref] = build_plan(inp, inner, qtype, depth + 1)
        else:
            plan.children[ref] = _pool_plan(inp, inp.snap.config.pools[ref], lb, qtype)
    return plan


def pop_location(inp: SteeringInputs) -> Location:
    region = inp.snap.node.pop_region
    return Location(region=region, source="pop") if region else NOWHERE


def trickle_backup(lb: LoadBalancer, ordering: Ordering) -> str | None:
    """steering.md §3: the backup is the first healthy candidate after the primary that is
    not the fallback pool (unless the LB lists that pool itself); there is none while the
    primary is unhealthy (ordinary failover) and none under `random` (no primary)."""
    refs = ordering.refs
    if ordering.primary is None or not refs or refs[0] != ordering.primary:
        return None
    for ref in refs[1:]:
        if ref != lb.fallback_pool or lb.listed(ref):
            return ref
    return None


def _pool_plan(inp: SteeringInputs, pool: Pool, lb: LoadBalancer, qtype: int) -> PoolPlan:
    affinity = select_backends(pool, inp.health, inp.client.zone, inp.snap.zone_regions)
    prefixes = []
    if pool.zonal_affinity.mode != "DISABLED" and inp.snap.config.client_zones:
        prefixes.append(inp.client.zone_prefix or inp.client.max_prefix)
    if lb.selection == "hash":
        prefixes.append(HASH_PREFIX[inp.client.address.version])
    matching = candidates_for(affinity.modified, qtype)
    return PoolPlan(pool, affinity, prefixes, matching, max(prefixes, default=0))


def execute(plan: LbPlan, subnet: bytes, rng: random.Random) -> LbDecision:
    """The per-query draws over a plan. Keep the order of draws: it is the contract that
    makes a cached plan answer exactly like a fresh one."""
    lb = plan.lb
    decision = LbDecision(lb=lb.name, policy=lb.steering, ttl=lb.ttl)
    decision.candidates = plan.candidates
    decision.trickle_ratio = plan.trickle_ratio
    decision.primary, decision.backup = plan.ordering.primary, plan.backup
    decision.rtt_source, decision.client_region = plan.ordering.rtt_source, lb.client_region
    decision.scope_prefixes = list(plan.scope_prefixes)
    decision.reasons.append(plan.ordering.reason)
    if plan.lb.client_region == "pop":
        decision.reasons.append("client_region pop: the client is placed in this node's region")
    refs = plan.ordering.refs
    if plan.ordering.weights is not None:
        refs = weighted.weighted_order(refs, plan.ordering.weights, rng)
    decision.ordered = refs
    ratio = plan.trickle_ratio
    if plan.fail_open_ref is not None:
        chosen = plan.fail_open_ref
        decision.fail_open = True
        decision.reasons.append(f"nothing healthy: {chosen} answers regardless of its health")
    elif plan.backup is not None and ratio > 0:
        draw = rng.random()
        decision.trickle_draw = draw
        chosen = plan.backup if draw < ratio else refs[0]
        decision.reasons.append(
            f"trickle {ratio} (primary {refs[0]}, backup {plan.backup}): draw {draw:.3f} -> {chosen}"
        )
    else:
        chosen = refs[0]
        decision.reasons.append(f"chosen {chosen}{_no_trickle(plan)}")
    decision.pool = chosen
    child = plan.children.get(chosen)
    if child is None:  # nesting too deep (cycles are rejected at load time)
        decision.reasons.append("nesting too deep: no answer")
        return decision
    if isinstance(child, LbPlan):
        decision.nested = execute(child, subnet, rng)
        return decision
    decision.affinity = child.affinity
    decision.scope_prefixes.extend(child.scope_prefixes)
    decision.addresses, decision.cname = pick_answer(
        lb, child.affinity.modified, plan.qtype, subnet, rng, child.matching
    )
    return decision


def execute_fast(
    plan: LbPlan, subnet: bytes, rng: random.Random
) -> tuple[tuple[str, ...], str | None, str | None, bool, int]:
    """`execute` without building the explanation: (addresses, cname, pool, fail_open,
    widest scope prefix). It must make exactly the same draws in the same order as
    `execute` — the byte-identity test of the answer cache holds it to that."""
    refs = plan.ordering.refs
    if plan.ordering.weights is not None:
        refs = weighted.weighted_order(refs, plan.ordering.weights, rng)
    fail_open = plan.fail_open_ref is not None
    if fail_open:
        chosen = plan.fail_open_ref
    elif plan.backup is not None and plan.trickle_ratio > 0:
        chosen = plan.backup if rng.random() < plan.trickle_ratio else refs[0]
    else:
        chosen = refs[0]
    scope = plan.scope_max
    child = plan.children.get(chosen)  # type: ignore[arg-type]
    if child is None:
        return (), None, chosen, fail_open, scope
    if isinstance(child, LbPlan):
        addresses, cname, pool, inner_fail_open, inner_scope = execute_fast(child, subnet, rng)
        return addresses, cname, pool, fail_open or inner_fail_open, max(scope, inner_scope)
    addresses, cname = pick_answer(
        plan.lb, child.affinity.modified, plan.qtype, subnet, rng, child.matching
    )
    return addresses, cname, chosen, fail_open, max(scope, child.scope_max)


Outcome = tuple[tuple[str, ...], str | None, str | None, bool, int]


@dataclass(frozen=True, slots=True)
class Draw:
    """One `rng.random()`: scaled by `scale`, the first threshold above it picks the
    branch (`branches` has one more entry than `thresholds`: the last is "none above")."""

    scale: float
    thresholds: tuple[float, ...]
    branches: tuple[Draw | int, ...]  # a Draw, or an index into the outcomes


def compile_draws(plan: LbPlan, subnet: bytes) -> tuple[Draw | int, list[Outcome]] | None:
    """`execute_fast` as data: a tree of draws whose leaves index the possible outcomes,
    making the same draws in the same order — walking it with the same random source
    gives the same outcome. None when the plan draws in ways a tree does not express (the
    `random` policy's pool order, several weighted answers): then `execute_fast` runs."""
    outcomes: list[Outcome] = []
    try:
        tree = _compile(plan, subnet, outcomes, False, 0)
    except _NotCompilable:
        return None
    return tree, outcomes


class _NotCompilable(Exception):
    pass


def _compile(plan: LbPlan, subnet: bytes, outcomes: list[Outcome], outer_fail_open: bool,
             outer_scope: int) -> Draw | int:  # fmt: skip
    if plan.ordering.weights is not None:
        raise _NotCompilable
    refs = plan.ordering.refs
    fail_open = outer_fail_open or plan.fail_open_ref is not None
    scope = max(outer_scope, plan.scope_max)

    def branch(chosen: str) -> Draw | int:
        child = plan.children.get(chosen)
        if child is None:
            outcomes.append(((), None, chosen, fail_open, scope))
            return len(outcomes) - 1
        if isinstance(child, LbPlan):
            return _compile(child, subnet, outcomes, fail_open, scope)
        picks = pick_draws(plan.lb, child.affinity.modified, plan.qtype, subnet, child.matching)
        if picks is None:
            raise _NotCompilable
        leaf_scope = max(scope, child.scope_max)

        def leaf(answer: tuple[tuple[str, ...], str | None]) -> int:
            outcomes.append((answer[0], answer[1], chosen, fail_open, leaf_scope))
            return len(outcomes) - 1

        if isinstance(picks, PickDraw):
            return Draw(picks.scale, picks.thresholds, tuple(leaf(a) for a in picks.answers))
        return leaf(picks)

    if plan.fail_open_ref is not None:
        return branch(plan.fail_open_ref)
    if plan.backup is not None and plan.trickle_ratio > 0:
        # execute_fast: backup if rng.random() < ratio else refs[0]
        return Draw(1.0, (plan.trickle_ratio,), (branch(plan.backup), branch(refs[0])))
    return branch(refs[0])


def walk(tree: Draw | int, rng: random.Random) -> int:
    """The outcome index a compiled tree gives for the next draws of `rng`."""
    while tree.__class__ is Draw:
        tree = tree.branches[bisect_right(tree.thresholds, rng.random() * tree.scale)]
    return tree  # type: ignore[return-value]


def _no_trickle(plan: LbPlan) -> str:
    """Why a configured trickle made no draw, for the explanation."""
    if plan.trickle_ratio <= 0 or plan.ordering.weights is not None:
        return "" if plan.trickle_ratio <= 0 else " (random steering: trickle ignored)"
    primary = plan.ordering.primary
    if primary is not None and plan.ordering.refs and plan.ordering.refs[0] != primary:
        return f" (primary {primary} unhealthy: failover, no trickle)"
    return " (no backup: the primary answers)"


def _able_checker(inp: SteeringInputs, depth: int) -> Callable[[str], bool]:
    """ref → healthy and able to answer this client (memoised for this plan).

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
