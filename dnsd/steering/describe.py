"""The explanation of one walk over a plan (docs/steering.md, the decision trail): the
outcome's route and the draws taken become an `LbDecision` with its reasons and why each
other pool did not answer. Nothing is decided here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from dnsd.config.model import LoadBalancer
from dnsd.steering import waterfall
from dnsd.steering.decision import LbDecision
from dnsd.steering.draws import Outcome, Taken
from dnsd.steering.multi import skipped
from dnsd.steering.plan import (
    LbPlan,
    PoolPlan,
    consulted_scopes,
    pool_order,
    ramp_share,
    several_apply,
)

RttMs = Callable[[LoadBalancer, str], "float | None"]


def describe(
    plan: LbPlan, outcome: Outcome, path: list[Taken], level: int = 0, rtt_ms: RttMs | None = None
) -> LbDecision:
    """The explanation of one walk of `compile_plan(plan)`: the outcome's route and the
    draws on `path`; nothing is decided here. `rtt_ms`: each candidate's RTT from the
    client's region, shown where the policy did not rank by RTT."""
    lb = plan.lb
    decision = LbDecision(lb=lb.name, policy=lb.steering, ttl=lb.ttl)
    decision.candidates = plan.candidates
    if rtt_ms is not None and plan.ordering.rtt_source is None:
        decision.candidates = [replace(c, rtt_ms=rtt_ms(lb, c.pool)) for c in plan.candidates]
    decision.trickle_ratio = plan.trickle_ratio
    decision.primary, decision.backup = plan.ordering.primary, plan.backup
    decision.rtt_source, decision.client_region = plan.ordering.rtt_source, lb.client_region
    decision.scope_prefixes = list(plan.scope_prefixes)
    decision.reasons.append(plan.ordering.reason)
    if lb.client_region == "pop":
        decision.reasons.append("client_region pop: the client is placed in this node's region")
    if plan.all_down is not None:
        return _describe_all_down(plan, outcome, decision)
    if plan.fail_open_ref is not None:
        decision.when_all_down = "fallback"
    chosen = outcome.route[level]
    drawn = {node.kind: value for node, value in path if node.owner is plan}
    refs = plan.ordering.refs
    decision.ordered = list(refs)
    if "pool" in drawn:  # the drawn pool first, the others in configured order
        decision.ordered = [chosen, *(ref for ref in refs if ref != chosen)]
    left = _describe_ramp(plan, drawn, decision)
    if left:
        decision.ordered = [chosen, *(ref for ref in refs if ref != chosen)]
    if plan.fail_open_ref is not None:
        decision.fail_open = True
        decision.reasons.append(
            f"nothing healthy: when_all_down fallback: {chosen} answers regardless of its health"
        )
    elif left:
        pass  # the ramp's reason says it
    elif spills := waterfall.spilled(path, plan, plan.admits, refs):
        decision.reasons.extend([*spills, f"chosen {chosen}"])
    elif "trickle" in drawn:
        if plan.trickle_step is not None and plan.lb.ramp is not None:
            moving = f"{plan.trickle_step} of {plan.lb.ramp.steps}"
            decision.reasons.append(f"ramp of the trickle ratio: step {moving} in force")
        draw = decision.trickle_draw = drawn["trickle"]
        decision.reasons.append(
            f"trickle {plan.trickle_ratio} (primary {refs[0]}, backup {plan.backup}): "
            f"draw {draw:.3f} -> {chosen}"
        )
    elif "pool" in drawn:
        decision.reasons.append(f"weighted draw {drawn['pool']:.3f} -> {chosen}{_no_trickle(plan)}")
    else:
        decision.reasons.append(f"chosen {chosen}{_no_trickle(plan)}")
    decision.pool = chosen
    decision.not_chosen = _not_chosen(plan, chosen, drawn)
    if plan.ramp is not None:
        to, gone = plan.ramp.to_ref, plan.ramp.from_ref
        other, why = (to, "has the share moved so far") if left else (gone, "keeps the rest")
        decision.not_chosen[other] = f"ramp from {gone} to {to}: {why}, not this draw"
    child = plan.children.get(chosen)
    if child is None:
        decision.reasons.append("nesting too deep: no answer")
    elif isinstance(child, LbPlan):
        decision.nested = describe(child, outcome, path, level + 1, rtt_ms)
    else:
        decision.affinity = child.affinity
        decision.scope_prefixes.extend(child.scope_prefixes)
        decision.addresses, decision.cname = outcome.addresses, outcome.cname
        if several_apply(plan, chosen):  # several pools answered, at this level
            _describe_several(plan, outcome, decision)
    return decision


def _describe_ramp(plan: LbPlan, drawn: Mapping[Any, Any], decision: LbDecision) -> bool:
    """The ramp's reason and record; True when its draw kept the pool being left."""
    if plan.ramp is None or plan.lb.ramp is None:
        return False
    ramp, share, draw = plan.ramp, ramp_share(plan), drawn.get("ramp")
    left = draw is not None and draw >= share
    decision.ramp = {
        "from": ramp.from_ref,
        "to": ramp.to_ref,
        "since": ramp.start_s,
        "step": plan.ramp_step,
        "steps": plan.lb.ramp.steps,
        "share": share,
        "draw": draw,
        "until": plan.until,
    }
    where = f"draw {draw:.3f} -> " if draw is not None else ""
    decision.reasons.append(
        f"ramp from {ramp.from_ref} to {ramp.to_ref}: step {plan.ramp_step} of "
        f"{plan.lb.ramp.steps}, {share:.0%} to {ramp.to_ref}: "
        f"{where}{ramp.from_ref if left else ramp.to_ref}"
    )
    return left


def _describe_several(plan: LbPlan, outcome: Outcome, decision: LbDecision) -> None:
    """docs/steering.md, several pools per answer: which pools the answer holds and why the
    others before the last of them are not in it."""
    lb = plan.lb
    order = pool_order(plan, decision.pool or outcome.route[-1])
    every = outcome.hints6 is not None  # HTTPS/SVCB: the IPv6 hints' pools count too
    decision.scope_prefixes.extend(consulted_scopes(order, outcome.pools, every))
    if not outcome.pools:  # HTTPS/SVCB with IPv6 hints only
        return
    decision.answer_pools = outcome.pools
    rule = f"answer_pools {lb.answer_pools}" + (f", distinct {lb.distinct}" if lb.distinct else "")
    parts = [f"{ref} {addr}" for ref, addr in zip(outcome.pools, outcome.addresses, strict=False)]
    decision.reasons.append(f"{rule}: one address from each of {', '.join(parts)}")
    first = plan.children.get(outcome.pools[0])
    if outcome.pools[0] != decision.pool and isinstance(first, PoolPlan):
        # steering's choice has no address of the asked family: the answer's first pool
        # stands for it (as in the metrics)
        decision.pool, decision.affinity = outcome.pools[0], first.affinity
    for ref in outcome.pools:
        decision.not_chosen.pop(ref, None)
    decision.not_chosen.update(skipped(lb, order, outcome))


ALL_DOWN_REASONS = {
    "closed": "NOERROR with no answer (the SOA with the load balancer's TTL as negative TTL)",
    "servfail": "SERVFAIL",
    "all": "every enabled address of its pools, health ignored",
    "last_good": "the answer last given to this client region while something was healthy",
}


def _describe_all_down(plan: LbPlan, outcome: Outcome, decision: LbDecision) -> LbDecision:
    """Nothing healthy and a rule other than `fallback`: the rule answered, no pool did."""
    rule = str(plan.all_down)  # set: the caller checked
    decision.fail_open, decision.when_all_down = True, rule
    decision.reasons.append(f"nothing healthy: when_all_down {rule}: {ALL_DOWN_REASONS[rule]}")
    decision.not_chosen = {c.pool: c.why_not or "unhealthy" for c in plan.candidates}
    decision.addresses, decision.cname = outcome.addresses, outcome.cname
    return decision


def _not_chosen(plan: LbPlan, chosen: str, drawn: Mapping[Any, Any]) -> dict[str, str]:
    """Why each pool the LB names did not answer this query (the chosen one is absent)."""
    refs, why = plan.ordering.refs, {}
    for c in plan.candidates:
        if c.pool == chosen or c.pool in why:
            continue
        if c.why_not is not None:
            why[c.pool] = c.why_not
        elif c.pool not in refs and c.pool == plan.lb.fallback_pool:
            why[c.pool] = "the fallback: it answers only when no default pool is healthy"
        elif c.pool not in refs:
            why[c.pool] = f"not in this client's order ({plan.ordering.reason})"
        elif plan.admits.get(c.pool, 1.0) < 1.0 and chosen in refs[refs.index(c.pool) :]:
            why[c.pool] = f"full: takes {plan.admits[c.pool]:.0%} of what reaches it, spilled"
        elif "trickle" in drawn and c.pool in (plan.backup, refs[0]):
            draw, ratio = drawn["trickle"], plan.trickle_ratio
            why[c.pool] = (
                f"trickle backup: draw {draw:.3f} >= ratio {ratio}, the primary answers"
                if c.pool == plan.backup
                else f"trickle: draw {draw:.3f} < ratio {ratio} sent this answer to the backup"
            )
        elif "pool" in drawn:
            why[c.pool] = f"weighted draw {drawn['pool']:.3f} picked {chosen}"
        else:
            why[c.pool] = f"standby: {chosen} comes first"
    return why


def _no_trickle(plan: LbPlan) -> str:
    """Why a configured trickle made no draw, for the explanation."""
    if plan.trickle_ratio <= 0 or plan.ordering.weights is not None:
        return "" if plan.trickle_ratio <= 0 else " (random steering: trickle ignored)"
    primary = plan.ordering.primary
    if primary is not None and plan.ordering.refs and plan.ordering.refs[0] != primary:
        return f" (primary {primary} unhealthy: failover, no trickle)"
    return " (no backup: the primary answers)"
