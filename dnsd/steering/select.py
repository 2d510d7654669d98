"""The steering pipeline for one load-balanced name (docs/steering.md, the pipeline), in two steps:

* `build_plan` — everything that is the same for every query from one client location
  while config and health stay the same: order the LB's pools with its policy (only pools
  that are healthy and able to answer this client), the fallback when nothing is healthy,
  nested `lb:` plans, and zonal affinity's eligible backends for each candidate pool. Pure
  and cacheable per (config generation, health generation, client location).
* `compile_plan` — the per-query draws over a plan as one tree (`draws.py`), walked by
  every server path; `describe.py` explains one walk from the draws it took. The plan's
  types are in `plan.py`.

Nothing healthy anywhere, the fallback included → the LB's `when_all_down` rule answers
(docs/steering.md, when all pools are down): `fallback` (the default) sends the fallback pool
(else the first default pool) regardless of its health; `closed`, `servfail` and `all` are
leaves of their own (no pool answers); the decision says which rule answered.

A ramp in force for the client's region (docs/steering.md, ramps; `ramp.py`) is one more
draw above the rest: its share goes to the plan as it is now, the remainder to the healthy
pool the region is moving away from. A plan with a ramp holds only until the next step
(`LbPlan.until`), so every cache of it ends there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from dnsd.affinity import original_eligible, select_backends
from dnsd.config.model import LoadBalancer, Pool
from dnsd.config.pool_refs import names_lb, nested_lb
from dnsd.geo.locate import NOWHERE, Location
from dnsd.health.view import LastGoodAnswer
from dnsd.rdata import SVC_TYPES
from dnsd.steering import dynamic, failover, geo, proximity, waterfall, weighted
from dnsd.steering.client import ClientInfo
from dnsd.steering.decision import Candidate, LbDecision
from dnsd.steering.describe import describe
from dnsd.steering.draws import Draw, Node, Outcome, Taken, walk, weighted_draw
from dnsd.steering.inputs import Ordering, SteeringInputs, pool_rtt_ms
from dnsd.steering.multi import Texts, answer_pools_node
from dnsd.steering.pick import Answer, answer_node, candidates_for
from dnsd.steering.plan import (
    LbPlan,
    PoolPlan,
    consulted_scopes,
    pool_order,
    ramp_share,
    several_apply,
)
from dnsd.steering.plan_key import SeenClient
from dnsd.steering.ramp import step_at, step_ends, trickle_at
from dnsd.steering.records import AAAA, A, LbAnswer
from dnsd.steering.skips import unable_reason

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


def steer(inp: SteeringInputs, lb: LoadBalancer, qtype: int) -> LbDecision:
    """Plan, draw, explain: the full path for one query."""
    return walked(inp, build_plan(inp, lb, qtype))


def walked(inp: SteeringInputs, plan: LbPlan) -> LbDecision:
    """One walk of the plan's draws: its explanation, carrying the decision
    (`LbDecision.answer`). The explanation shows each candidate's RTT from the client's
    region even where the policy did not read it (the plan does not: a plan that read no
    region serves every region)."""
    path: list[Taken] = []
    outcome = walk(compile_plan(plan, inp.client.subnet_key()), inp.rng, path)

    def rtt_ms(lb: LoadBalancer, ref: str) -> float | None:
        by_pop = lb.client_region == "pop"
        region = inp.snap.node.pop_region if by_pop else inp.client.location.region
        return pool_rtt_ms(inp, lb, ref, region)

    decision = describe(plan, outcome, path, rtt_ms=rtt_ms)
    decision.answer = LbAnswer(plan.lb.name, plan.lb.ttl, outcome, plan.qtype in SVC_TYPES)
    return decision


def build_plan(inp: SteeringInputs, lb: LoadBalancer, qtype: int) -> LbPlan:
    """The plan for this client, with what it depended on (`LbPlan.key`: the client fields
    read, plan_key.py) and how long it holds (`until`, `per_view`)."""
    seen = SeenClient(inp.client) if isinstance(inp.client, ClientInfo) else inp.client
    plan = _build(SteeringInputs(inp.snap, inp.health, seen, inp.rng, inp.now), lb, qtype, 0)
    if isinstance(seen, SeenClient):
        plan.key = seen.key(lb.name, qtype)
    return plan


def _build(inp: SteeringInputs, lb: LoadBalancer, qtype: int, depth: int) -> LbPlan:
    by_pop = lb.client_region == "pop"
    if by_pop:  # docs/steering.md, locating the client: every client here is in the node's region
        inp = replace(inp, client=inp.client.placed(pop_location(inp)))
    able = able_checker(inp, depth)
    ordering = POLICIES[lb.steering](lb, able, inp)
    # only a policy that ranked by RTT reads it here; explain adds the rest (`walked`)
    source = ordering.rtt_source
    candidates = [
        Candidate(
            ref, ok, pool_rtt_ms(inp, lb, ref, source), None if ok else unable_reason(inp, ref)
        )
        for ref, ok in ((ref, able(ref)) for ref in lb.pool_refs())
    ]
    rule, remembered = (None, ((), None)) if ordering.refs else all_down_rule(inp, lb, qtype)
    plan = LbPlan(
        lb=lb,
        qtype=qtype,
        candidates=candidates,
        ordering=ordering,
        trickle_ratio=inp.health.trickle_ratio(lb.name, lb.trickle_ratio),
        fail_open_ref=(lb.fallback_pool or lb.default_pools[0]) if rule == "fallback" else None,
        backup=trickle_backup(lb, ordering),
        all_down=None if rule == "fallback" else rule,
    )
    if rule == "all":
        plan.all_addresses = every_address(inp, lb, qtype)
    elif rule == "last_good":
        plan.all_addresses, plan.all_cname = remembered
    if qtype in SVC_TYPES and rule in ("all", "last_good"):  # the IPv6 hints beside them
        plan.all_addresses6 = _all_down_v6(inp, lb, rule)
    if (ordering.location_dependent or rule == "last_good") and not by_pop:
        plan.scope_prefixes.append(inp.client.location.prefix_len or inp.client.max_prefix)
    plan.scope_max = max(plan.scope_prefixes, default=0)
    if ordering.rtt_until is not None:  # ranked by this view's RTTs
        plan.per_view, plan.until = True, min(plan.until, ordering.rtt_until)
    if plan.all_down is not None:
        return plan  # no pool answers: nothing to plan below
    _ramp(plan, inp, able, by_pop)
    if lb.ramp is not None and lb.name in inp.health.trickle_ramps:  # the ratio moves in steps
        moving = inp.health.trickle_ramps[lb.name]
        plan.trickle_ratio, plan.trickle_step, until = trickle_at(
            lb, moving, plan.trickle_ratio, inp.now
        )
        plan.until = min(plan.until, until)
    if lb.overflow == "waterfall" and ordering.weights is None:
        plan.admits = {ref: inp.health.pool_admit.get(ref, 1.0) for ref in ordering.refs}
        plan.per_view = True  # the load each view publishes
    refs = ordering.refs or [plan.fail_open_ref or lb.default_pools[0]]
    for ref in [*refs, plan.ramp.from_ref] if plan.ramp is not None else refs:
        if (name := nested_lb(ref)) is not None:
            if depth >= MAX_DEPTH:
                plan.too_deep = True
                continue
            inner_lb = inp.snap.config.load_balancers[name]
            inner = _build(inp, inner_lb, qtype, depth + 1)
            plan.children[ref] = inner
            plan.until = min(plan.until, inner.until)
            plan.per_view = plan.per_view or inner.per_view
        else:
            plan.children[ref] = _pool_plan(inp, inp.snap.config.pools[ref], lb, qtype)
    return plan


def _ramp(plan: LbPlan, inp: SteeringInputs, able: Callable[[str], bool], by_pop: bool) -> None:
    """docs/steering.md, ramps: the move in force for the client's region, if any. It holds
    while the region's first choice is still the pool moved to, the pool left is still
    healthy by its probes (leaving an unhealthy pool is never ramped; an operator's drain
    leaves a healthy one) and the ramp is in a step before its last; the plan ends with
    the step. `random` steering has no first choice to move: no ramp."""
    lb, refs = plan.lb, plan.ordering.refs
    if lb.ramp is None or not refs or plan.ordering.weights is not None:
        return
    start = inp.health.ramps.get((lb.name, inp.client.location.region or ""))
    to = first_choice(plan)
    if start is None or start.to_ref != to or start.from_ref == to:
        return
    if start.from_ref not in lb.pool_refs() or not left_healthy(inp, start.from_ref, able):
        return
    step = step_at(lb.ramp, start.start_s, inp.now)
    if step is None:
        plan.until = min(plan.until, start.start_s) if inp.now < start.start_s else plan.until
        return
    plan.ramp, plan.ramp_step = start, step
    plan.until = min(plan.until, step_ends(lb.ramp, start.start_s, inp.now))
    if not by_pop:  # the share depends on the client's region
        plan.scope_prefixes.append(inp.client.location.prefix_len or inp.client.max_prefix)
        plan.scope_max = max(plan.scope_prefixes)


def first_choice(plan: LbPlan) -> str | None:
    """Where the plan sends a client region's answers (docs/steering.md, ramps): its first
    healthy entry, or the trickle's backup under a trickle of 1.0 (a manual failover);
    None under `random` (no first choice) or with nothing healthy."""
    refs = plan.ordering.refs
    if not refs or plan.ordering.weights is not None:
        return None
    if plan.backup is not None and plan.trickle_ratio >= 1.0:
        return plan.backup
    return refs[0]


def left_healthy(inp: SteeringInputs, ref: str, able: Callable[[str], bool]) -> bool:
    """The pool a ramp moves away from still answers for it: healthy by its probes (an
    override that drains it aside), or a nested load balancer able to answer."""
    if names_lb(ref):
        return able(ref)
    pool = inp.snap.config.pools.get(ref)
    return pool is not None and inp.health.probed_healthy(pool)


def all_down_rule(inp: SteeringInputs, lb: LoadBalancer, qtype: int) -> tuple[str, LastGoodAnswer]:
    """The rule answering when nothing is healthy, and for `last_good` the answer last
    given to this client's region (the health view keeps them); none known: `fallback`."""
    if lb.when_all_down != "last_good":
        return lb.when_all_down, ((), None)
    known = inp.health.last_good.get(last_good_key(lb, inp.client.location.region, qtype))
    return ("fallback", ((), None)) if known is None else ("last_good", known)


def _all_down_v6(inp: SteeringInputs, lb: LoadBalancer, rule: str) -> tuple[str, ...]:
    """An HTTPS/SVCB answer's IPv6 hints under `all` or `last_good`: what AAAA answers."""
    if rule == "all":
        return every_address(inp, lb, AAAA)
    known = inp.health.last_good.get(last_good_key(lb, inp.client.location.region, AAAA))
    return known[0] if known is not None else ()


def last_good_key(lb: LoadBalancer, region: str | None, qtype: int) -> tuple[str, str, int]:
    """Where the health view keeps a `last_good` answer: load balancer, region, A or AAAA."""
    return lb.name, region or "", AAAA if qtype == AAAA else A


def every_address(inp: SteeringInputs, lb: LoadBalancer, qtype: int) -> tuple[str, ...]:
    """`when_all_down: all` (gdnsd multifo's way): every enabled address of the asked family
    in the LB's pools (nested load balancers' too), in configuration order, health ignored;
    drained backends and disabled pools are not enabled."""
    config, seen, out = inp.snap.config, {lb.name}, list[str]()
    todo = [lb]
    while todo:
        for ref in todo.pop(0).pool_refs():
            if (name := nested_lb(ref)) is not None:
                inner = config.load_balancers.get(name)
                if inner is not None and inner.name not in seen and len(seen) <= MAX_DEPTH:
                    seen.add(inner.name)
                    todo.append(inner)
                continue
            pool = config.pools.get(ref)
            if pool is None or not pool.enabled:
                continue
            usable = tuple(b for b in pool.backends if inp.health.usable(pool, b))
            out.extend(b.address_text for b in candidates_for(usable, qtype))
    return tuple(dict.fromkeys(out))


def pop_location(inp: SteeringInputs) -> Location:
    region = inp.snap.node.pop_region
    return Location(region=region, source="pop") if region else NOWHERE


def trickle_backup(lb: LoadBalancer, ordering: Ordering) -> str | None:
    """docs/steering.md, trickle: the backup is the first healthy candidate after the primary that is
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
        prefixes.append(HASH_PREFIX[inp.client.version])
    joint = qtype in SVC_TYPES  # HTTPS/SVCB: both families' addresses, for the hints
    matching = candidates_for(affinity.modified, A if joint else qtype)
    matching6 = candidates_for(affinity.modified, AAAA) if joint else None
    return PoolPlan(pool, affinity, prefixes, matching, max(prefixes, default=0), matching6)


def compile_plan(plan: LbPlan, subnet: bytes) -> Node:
    """The plan's per-query draws as one tree (`draws.py`), in a fixed order: the `random`
    policy's pool, else the trickle draw (primary or backup, docs/steering.md, trickle), then the
    nested load balancer's draws, then the answer's. Same plan + same random source →
    same outcome, whether the plan came from a cache or was just built."""
    return _compile(plan, subnet, (), False, 0)


def _compile(
    plan: LbPlan, subnet: bytes, route: tuple[str, ...], outer_fail_open: bool, outer_scope: int
) -> Node:
    fail_open = outer_fail_open or plan.fail_open_ref is not None
    scope = max(outer_scope, plan.scope_max)

    def branch(chosen: str) -> Node:
        here = (*route, chosen)
        child = plan.children.get(chosen)
        if child is None:  # nesting too deep (cycles are rejected at load time): no answer
            return Outcome((), None, chosen, fail_open, scope, here)
        if isinstance(child, LbPlan):
            return _compile(child, subnet, here, fail_open, scope)
        if several_apply(plan, chosen):
            several = _several(plan, chosen, subnet, route, fail_open, scope)
            if several is not None:
                return several
        widest = max(scope, child.scope_max)
        matching6 = child.matching6

        def leaf(answer: Answer) -> Node:
            if matching6 is None:
                return Outcome(answer[0], answer[1], chosen, fail_open, widest, here)
            if not matching6:  # HTTPS/SVCB, no IPv6 address here: no ipv6hint
                return Outcome(answer[0], answer[1], chosen, fail_open, widest, here, hints6=())

            def with_v6(v6: Answer) -> Outcome:  # the IPv6 hints drawn after the IPv4 ones
                return Outcome(answer[0], answer[1], chosen, fail_open, widest, here, hints6=v6[0])

            return answer_node(plan.lb, child.affinity.modified, matching6, subnet, with_v6, child)

        return answer_node(
            plan.lb, child.affinity.modified, child.matching, subnet, leaf, owner=child
        )

    refs = plan.ordering.refs
    if plan.all_down is not None:  # no pool answers: the rule's own leaf
        rule, v6 = plan.all_down, plan.all_addresses6
        return Outcome(
            plan.all_addresses, plan.all_cname, None, True, scope, route, rule, hints6=v6
        )
    if plan.fail_open_ref is not None:
        return branch(plan.fail_open_ref)
    if plan.ordering.weights is not None and len(refs) > 1:
        scale, thresholds, items = weighted_draw(plan.ordering.weights)
        nodes = {i: branch(refs[i]) for i in set(items)}
        return Draw(scale, thresholds, tuple(nodes[i] for i in items), "pool", plan)
    if len(refs) > 1 and any(a < 1.0 for a in plan.admits.values()):
        now: Node = waterfall.chain(refs, plan.admits, branch, plan)
    elif plan.backup is not None and plan.trickle_ratio > 0:  # backup if draw < ratio
        branches = (branch(plan.backup), branch(refs[0]))
        now = Draw(1.0, (plan.trickle_ratio,), branches, "trickle", plan)
    else:
        now = branch(refs[0])
    if plan.ramp is not None:  # the share moved so far if draw < share, else the pool left
        share = ramp_share(plan)
        return Draw(1.0, (share,), (now, branch(plan.ramp.from_ref)), "ramp", plan)
    return now


def _several(
    plan: LbPlan, chosen: str, subnet: bytes, route: tuple[str, ...], fail_open: bool, scope: int
) -> Node | None:
    """One address from each of the first `answer_pools` pools (`multi.py`); None when no
    pool has an address of the asked family."""
    order = pool_order(plan, chosen)
    order6 = None
    if plan.qtype in SVC_TYPES:  # HTTPS/SVCB: the IPv6 hints from the same pools' order
        order6 = pool_order(plan, chosen, v6=True)

    def leaf(addresses: Texts, pools: Texts, hints6: Texts | None) -> Outcome:
        here = (*route, chosen)  # steering's choice; `pool`: the first pool in the answer
        widest = max([scope, *consulted_scopes(order, pools, hints6 is not None)])
        first = pools[0] if pools else chosen
        return Outcome(addresses, None, first, fail_open, widest, here, pools=pools, hints6=hints6)

    return answer_pools_node(plan.lb, order, subnet, leaf, order6)


def able_checker(inp: SteeringInputs, depth: int) -> Callable[[str], bool]:
    """ref → healthy and able to answer this client (memoised for this plan).

    A pool is able when healthy (docs/health.md) and its original eligible set is not empty
    (drop_traffic_if_unhealthy can empty it). A nested `lb:NAME` is able when the inner
    load balancer has an able pool (docs/steering.md, nesting).
    """
    return _Able(inp, depth)


class _Able:
    """able_checker's memo. A class, not a closure that calls itself: such a closure is a
    reference cycle, which would keep the snapshot it steered from until a full
    collection (or for good, when made while a load freezes what it made)."""

    __slots__ = ("config", "depth", "health", "memo")

    def __init__(self, inp: SteeringInputs, depth: int) -> None:
        self.config, self.health, self.depth = inp.snap.config, inp.health, depth
        self.memo: dict[str, bool] = {}

    def __call__(self, ref: str) -> bool:
        memo = self.memo
        if ref in memo:
            return memo[ref]
        memo[ref] = False  # guards against cycles (also rejected at load time)
        if (name := nested_lb(ref)) is not None:
            inner = self.config.load_balancers.get(name)
            ok = (
                inner is not None
                and self.depth < MAX_DEPTH
                and any(self(r) for r in inner.pool_refs())
            )
        else:
            pool = self.config.pools.get(ref)
            ok = (
                pool is not None
                and self.health.pool_healthy(pool)
                and bool(original_eligible(pool, self.health)[1])
            )
        memo[ref] = ok
        return ok
