"""A load balancer's plan for one client location (`select.build_plan` makes it): its pools
in policy order, each pool's eligible backends, the fallback, the ramp and the trickle in
force; and what a walk over the plan reads of it (the share and order of its pools).
Shared by the draws (`select.compile_plan`) and their explanation (`describe.py`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dnsd.affinity import AffinityDecision
from dnsd.config.model import Backend, LoadBalancer, Pool
from dnsd.health.view import RampStart
from dnsd.rdata import SVC_TYPES
from dnsd.steering.decision import Candidate
from dnsd.steering.inputs import Ordering
from dnsd.steering.multi import PoolChoice, Texts
from dnsd.steering.plan_key import PlanKey


@dataclass(slots=True)
class PoolPlan:
    pool: Pool
    affinity: AffinityDecision
    scope_prefixes: list[int]
    matching: list[Backend]  # the modified eligible set, of the asked address family
    scope_max: int = 0
    # an HTTPS/SVCB answer's IPv6 hints (`matching` holds the IPv4 ones); None otherwise
    matching6: list[Backend] | None = None


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
    # nothing healthy and a rule other than `fallback`: that rule answers, no pool does
    all_down: str | None = None
    all_addresses: tuple[str, ...] = ()  # `all`: every enabled address of the asked family
    all_cname: str | None = None  # `last_good`: a CNAME answer remembered
    # docs/steering.md, ramps: the move in force (None: none) and its step (1 … steps - 1)
    ramp: RampStart | None = None
    ramp_step: int = 0
    until: float = math.inf  # wall clock: the plan (with its nested ones) holds until then
    per_view: bool = False  # it read RTT or load data: it holds for this health view only
    # what it depended on: the client fields it read (plan_key.py); set on the outermost
    key: PlanKey | None = None
    trickle_step: int | None = None  # the trickle ratio's ramp: its step in force
    # docs/steering.md, capacity waterfall: per pool in the order, the share it takes
    admits: dict[str, float] = field(default_factory=dict)
    all_addresses6: tuple[str, ...] | None = None  # an HTTPS/SVCB answer's IPv6 hints


def lasting(plan: LbPlan) -> bool:
    """The plan holds until config or health states change (no clock, no RTT, no load)."""
    return not plan.per_view and plan.until == math.inf


def ramp_share(plan: LbPlan) -> float:
    """The share of answers the plan's ramp gives its new first choice."""
    return plan.ramp_step / plan.lb.ramp.steps if plan.lb.ramp is not None else 1.0


def pool_order(plan: LbPlan, chosen: str, v6: bool = False) -> list[PoolChoice]:
    """docs/steering.md, several pools per answer: the pools in the order steering chose for
    this walk — the one drawn or trickled to first, then the others in policy order.
    `v6`: with an HTTPS/SVCB answer's IPv6 addresses instead of the IPv4 ones."""
    refs = [chosen, *(ref for ref in plan.ordering.refs if ref != chosen)]
    children = [(ref, plan.children.get(ref)) for ref in refs]
    return [
        PoolChoice(r, c.pool, (c.matching6 or []) if v6 else c.matching, c)
        for r, c in children
        if isinstance(c, PoolPlan)
    ]


def several_apply(plan: LbPlan, chosen: str) -> bool:
    """`answer_pools` answers this walk: configured, a pool answering (not the fallback
    regardless of health), and an address of the asked family (or an HTTPS/SVCB answer's
    IPv6 hint) in some pool of the order."""
    if plan.lb.answer_pools < 2 or plan.fail_open_ref is not None:
        return False
    order = pool_order(plan, chosen)
    return any(c.matching for c in order) or (
        plan.qtype in SVC_TYPES and any(c.matching for c in pool_order(plan, chosen, v6=True))
    )


def consulted_scopes(order: list[PoolChoice], pools: Texts, every: bool = False) -> list[int]:
    """The ECS scope prefixes of every pool the answer looked at: those in it and those
    skipped before the last of them (a skipped pool's eligible set decided it was skipped);
    `every`: all of them (an HTTPS/SVCB answer, whose IPv6 hints may come from others)."""
    found = [i for i, c in enumerate(order) if c.ref in pools]
    last = len(order) - 1 if every or not found else max(found)
    return [
        p
        for c in order[: last + 1]
        if isinstance(c.owner, PoolPlan)
        for p in c.owner.scope_prefixes
    ]
