"""The load balancer graph (docs/development.md, the LB graph): per load balancer what it
reaches — pools, nested load balancers, the fallback — the policies in its tree, and
whether it steers by RTT or by coordinates. Compiled once per configuration with the
snapshot; the answer cache, transfers, the status page and the active-pool watch read it
instead of walking the references themselves.

Load balancers configured alike but for their name form a *class*: they reach the same
pools and nested load balancers and decide alike, so reach is kept per class and a
health change is mapped to classes (`LbGraph.reached`, the one definition of what a
change touches).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from dnsd.config.model import Config, LoadBalancer
from dnsd.config.pool_refs import pool_ref


@dataclass(frozen=True, slots=True)
class LbReach:
    """What every member of one class reaches."""

    pools: tuple[str, ...]  # the pools it can answer from (nested and fallback included)
    nested: tuple[str, ...]  # the load balancers nested in it, however deep (not itself)
    policies: frozenset[str]  # the steering policies in its tree
    by_rtt: bool  # `dynamic` somewhere in the tree
    timed: bool  # by RTT or by load (a capacity waterfall): plans expire with each view
    by_coordinates: bool  # `proximity` somewhere in the tree


@dataclass(frozen=True, slots=True)
class LbGraph:
    classes: Mapping[str, int]  # load balancer → its class
    reach_of: tuple[LbReach, ...]  # class → what it reaches
    members: tuple[tuple[str, ...], ...]  # class → its load balancers, in config order
    by_pool: Mapping[str, tuple[int, ...]]  # pool → the classes that can answer from it
    by_lb: Mapping[str, tuple[int, ...]]  # load balancer → the classes nesting it
    by_rtt: frozenset[int]  # the classes that steer by RTT
    nested_only: frozenset[str]  # load balancers no zone names: they answer through others
    order: Mapping[str, int]  # load balancer → its place in the config

    def reach(self, lb: str) -> LbReach:
        return self.reach_of[self.classes[lb]]

    def tree(self, lb: str) -> frozenset[str]:
        """`lb` and every load balancer it nests."""
        return frozenset((lb, *self.reach(lb).nested))

    def reached(
        self, pools: Iterable[str], rtt_pools: Iterable[str] = (), lbs: Iterable[str] = ()
    ) -> tuple[set[int], set[str]]:
        """What a health change can move — the one definition: the classes that can answer
        from a pool whose verdicts or overrides changed, those that steer by RTT and can
        answer from a pool whose RTTs moved, and those nesting a load balancer whose trickle
        ratio changed; and those load balancers themselves (not their whole class: a
        trickle override is one load balancer's own)."""
        hit: set[int] = set()
        for pool in pools:
            hit.update(self.by_pool.get(pool, ()))
        for pool in rtt_pools:
            hit.update(k for k in self.by_pool.get(pool, ()) if k in self.by_rtt)
        own = {lb for lb in lbs if lb in self.classes}
        for lb in own:
            hit.update(self.by_lb.get(lb, ()))
        return hit, own

    def reached_classes(
        self, pools: Iterable[str], rtt_pools: Iterable[str] = (), lbs: Iterable[str] = ()
    ) -> set[int]:
        """`reached` by class: a trickle-changed load balancer's whole class."""
        classes, own = self.reached(pools, rtt_pools, lbs)
        return classes | {self.classes[lb] for lb in own}

    def reached_lbs(
        self, pools: Iterable[str], rtt_pools: Iterable[str] = (), lbs: Iterable[str] = ()
    ) -> list[str]:
        """`reached` by load balancer, in config order."""
        classes, own = self.reached(pools, rtt_pools, lbs)
        found = own.union(*(self.members[kind] for kind in classes))
        return sorted(found, key=self.order.__getitem__)


def compile_lb_graph(config: Config) -> LbGraph:
    lbs = config.load_balancers
    kinds: dict[str, int] = {}
    classes = {
        name: kinds.setdefault(repr(replace(lb, name="")), len(kinds)) for name, lb in lbs.items()
    }
    members: list[list[str]] = [[] for _ in kinds]
    for name, kind in classes.items():
        members[kind].append(name)
    # Equal sets are one object: load balancers configured alike (or nearly) have equal
    # policies, nests and pool classes. Sets of names are sorted tuples: a frozenset costs
    # 216 bytes or more, a tuple of two 56 (most load balancers reach a pool or two of
    # their own: 4 MiB across 10,000 of them).
    shared: dict[Any, Any] = {}
    reach_of = tuple(_reach(lbs, group[0], shared) for group in members)
    by_pool: dict[str, set[int]] = {}
    by_lb: dict[str, set[int]] = {}
    for kind, reach in enumerate(reach_of):
        for pool in reach.pools:
            by_pool.setdefault(pool, set()).add(kind)
        for inner in reach.nested:
            by_lb.setdefault(inner, set()).add(kind)
    nested = {name for reach in reach_of for name in reach.nested}
    named = {lb for zone in config.zones for lb in zone.lb_names.values()}
    return LbGraph(
        classes=MappingProxyType(classes),
        reach_of=reach_of,
        members=tuple(tuple(group) for group in members),
        by_pool=MappingProxyType({p: _sorted(shared, k) for p, k in by_pool.items()}),
        by_lb=MappingProxyType({n: _sorted(shared, k) for n, k in by_lb.items()}),
        by_rtt=frozenset(k for k, reach in enumerate(reach_of) if reach.by_rtt),
        nested_only=frozenset(nested - named),
        order=MappingProxyType({name: i for i, name in enumerate(lbs)}),
    )


def _one(shared: dict[Any, Any], items: Iterable[Any]) -> frozenset[Any]:
    made = frozenset(items)
    return shared.setdefault(made, made)


def _sorted(shared: dict[Any, Any], items: Iterable[Any]) -> tuple[Any, ...]:
    made = tuple(sorted(items))
    return shared.setdefault(made, made)


def _reach(lbs: Mapping[str, LoadBalancer], name: str, shared: dict[Any, Any]) -> LbReach:
    seen, todo, pools = {name}, [lbs[name]], set()
    tree: list[LoadBalancer] = []
    while todo:
        lb = todo.pop()
        tree.append(lb)
        for ref in map(pool_ref, lb.pool_refs()):  # the fallback pool included
            if not ref.lb:
                pools.add(ref.name)
            elif ref.name not in seen and ref.name in lbs:  # loops: rejected by validation
                seen.add(ref.name)
                todo.append(lbs[ref.name])
    policies = _one(shared, (lb.steering for lb in tree))
    return LbReach(
        pools=_sorted(shared, pools),
        nested=_sorted(shared, seen - {name}),
        policies=policies,
        by_rtt="dynamic" in policies,
        timed="dynamic" in policies or any(lb.overflow == "waterfall" for lb in tree),
        by_coordinates="proximity" in policies,
    )
