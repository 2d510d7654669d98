"""A load balancer's entries are references: a pool's name, or `lb:NAME` for a nested load
balancer (docs/steering.md, nested load balancers). The prefix is read here and in the rest
of `dnsd/config/` only; everything else asks these functions."""

from __future__ import annotations

from dnsd.config.model import LB_PREFIX


def nested_lb(ref: str) -> str | None:
    """The load balancer `ref` names (`lb:api` → "api"); None when it names a pool."""
    return ref[len(LB_PREFIX) :] if ref.startswith(LB_PREFIX) else None


def names_lb(ref: str) -> bool:
    """`ref` names a nested load balancer, not a pool."""
    return ref.startswith(LB_PREFIX)
