"""A load balancer's entries are references: a pool's name, or `lb:NAME` for a nested load
balancer (docs/steering.md, nested load balancers). The prefix is read here and in the rest
of `dnsd/config/` only; everything else asks these functions."""

from __future__ import annotations

from dataclasses import dataclass

from dnsd.config.model import LB_PREFIX


def nested_lb(ref: str) -> str | None:
    """The load balancer `ref` names (`lb:api` → "api"); None when it names a pool."""
    return ref[len(LB_PREFIX) :] if ref.startswith(LB_PREFIX) else None


def names_lb(ref: str) -> bool:
    """`ref` names a nested load balancer, not a pool."""
    return ref.startswith(LB_PREFIX)


@dataclass(frozen=True, slots=True)
class PoolRef:
    """A reference read once: the pool or the nested load balancer it names."""

    name: str
    lb: bool  # names a nested load balancer, not a pool


def pool_ref(ref: str) -> PoolRef:
    inner = nested_lb(ref)
    return PoolRef(ref, False) if inner is None else PoolRef(inner, True)
